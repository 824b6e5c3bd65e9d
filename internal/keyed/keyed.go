// Package keyed serialises work per key.
package keyed

import "sync"

// Mutex serialises work per key (one user's connects in one pool) without
// a lock per possible key: entries live while someone holds or waits for
// them. The zero Mutex is ready to use.
type Mutex struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	mu   sync.Mutex
	refs int
}

// Lock locks key and returns its unlock function.
func (k *Mutex) Lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = make(map[string]*entry)
	}
	e, ok := k.m[key]
	if !ok {
		e = &entry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()

	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
