package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
)

// eventWriter is the part of golang.org/x/sys/windows/svc/eventlog.Log the
// service logs through.
type eventWriter interface {
	Info(eid uint32, msg string) error
	Warning(eid uint32, msg string) error
	Error(eid uint32, msg string) error
}

// eventLogHandler is a slog.Handler that writes each record to the Windows
// event log as one event: its level picks the event type and id
// (eventIDInfo, eventIDWarning, eventIDError), its message and attributes
// are text as on Linux's stderr, without the time (every event has its own).
type eventLogHandler struct {
	w     eventWriter
	mu    *sync.Mutex
	buf   *bytes.Buffer
	inner slog.Handler // writes into buf
}

func newEventLogHandler(w eventWriter, level slog.Leveler) *eventLogHandler {
	buf := &bytes.Buffer{}
	inner := slog.NewTextHandler(buf, &slog.HandlerOptions{Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}})
	return &eventLogHandler{w: w, mu: &sync.Mutex{}, buf: buf, inner: inner}
}

// Enabled implements slog.Handler.
func (h *eventLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

// Handle implements slog.Handler.
func (h *eventLogHandler) Handle(ctx context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.buf.Reset()
	if err := h.inner.Handle(ctx, r); err != nil {
		return err
	}
	msg := strings.TrimSpace(h.buf.String())
	switch {
	case r.Level >= slog.LevelError:
		return h.w.Error(eventIDError, msg)
	case r.Level >= slog.LevelWarn:
		return h.w.Warning(eventIDWarning, msg)
	}
	return h.w.Info(eventIDInfo, msg)
}

// WithAttrs implements slog.Handler.
func (h *eventLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &eventLogHandler{w: h.w, mu: h.mu, buf: h.buf, inner: h.inner.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h *eventLogHandler) WithGroup(name string) slog.Handler {
	return &eventLogHandler{w: h.w, mu: h.mu, buf: h.buf, inner: h.inner.WithGroup(name)}
}
