package sim

import (
	"embed"
	"fmt"
	"sort"
	"strings"
)

//go:embed examples/*.yaml
var examplesFS embed.FS

// Examples returns the names of the built-in scenarios.
func Examples() []string {
	entries, _ := examplesFS.ReadDir("examples")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(names)
	return names
}

// Example returns a built-in scenario's YAML.
func Example(name string) ([]byte, error) {
	data, err := examplesFS.ReadFile("examples/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("unknown example %q (have: %s)", name, strings.Join(Examples(), ", "))
	}
	return data, nil
}
