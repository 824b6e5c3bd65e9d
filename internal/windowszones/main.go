// Command windowszones writes the table of Windows time-zone names
// ("W. Europe Standard Time") and their IANA zones ("Europe/Berlin") that
// scaling plans accept (timezone.go in the root package), from the Unicode
// CLDR's supplemental/windowsZones.json: for each Windows name, the zone
// of territory 001, CLDR's "golden zone" for it.
//
// The data comes from the cldr-core package of the npm registry, fetched
// with npm (it must be on PATH):
//
//	go generate ./...            # runs, in the repository's root:
//	go run ./internal/windowszones -cldr-core 48.2.0 -o windowszones_gen.go
//
// or, offline, from a tarball fetched before with
// `npm pack cldr-core@48.2.0`:
//
//	go run ./internal/windowszones -tgz cldr-core-48.2.0.tgz -o windowszones_gen.go
//
// To move to a newer CLDR, change the version in the go:generate line of
// timezone.go, run go generate and commit the regenerated file: its header
// names the CLDR release it came from.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// windowsZonesPath is the file of the cldr-core package that holds the
// mapping.
const windowsZonesPath = "package/supplemental/windowsZones.json"

func main() {
	version := flag.String("cldr-core", "", "version of the npm package cldr-core to fetch with `npm pack`")
	tgz := flag.String("tgz", "", "read this cldr-core tarball instead of fetching one")
	out := flag.String("o", "windowszones_gen.go", "Go file to write")
	pkg := flag.String("package", "vdibroker", "package of the generated file")
	flag.Parse()
	if err := run(*version, *tgz, *out, *pkg); err != nil {
		fmt.Fprintln(os.Stderr, "windowszones:", err)
		os.Exit(1)
	}
}

func run(version, tgz, out, pkg string) error {
	if (version == "") == (tgz == "") {
		return errors.New("give -cldr-core VERSION or -tgz FILE")
	}
	if tgz == "" {
		dir, err := os.MkdirTemp("", "windowszones-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if tgz, err = npmPack(version, dir); err != nil {
			return err
		}
	}
	raw, err := readFromTarball(tgz, windowsZonesPath)
	if err != nil {
		return err
	}
	zones, cldr, err := parse(raw)
	if err != nil {
		return fmt.Errorf("%s in %s: %w", windowsZonesPath, tgz, err)
	}
	src, err := render(pkg, cldr, filepath.Base(tgz), zones)
	if err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}

// npmPack fetches cldr-core@version into dir and returns the tarball's
// path.
func npmPack(version, dir string) (string, error) {
	cmd := exec.Command("npm", "pack", "--silent", "--pack-destination", dir, "cldr-core@"+version)
	cmd.Stderr = os.Stderr
	name, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("npm pack cldr-core@%s: %w", version, err)
	}
	return filepath.Join(dir, strings.TrimSpace(string(name))), nil
}

// readFromTarball returns the file at name in the gzipped tarball path.
func readFromTarball(path, name string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("%s holds no %s", path, name)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if h.Name == name {
			return io.ReadAll(io.LimitReader(tr, 16<<20))
		}
	}
}

// windowsZonesFile is the part of windowsZones.json the table needs.
type windowsZonesFile struct {
	Supplemental struct {
		Version struct {
			CLDR string `json:"_cldrVersion"`
		} `json:"version"`
		WindowsZones struct {
			MapTimezones []struct {
				MapZone struct {
					Windows   string `json:"_other"`
					IANA      string `json:"_type"`
					Territory string `json:"_territory"`
				} `json:"mapZone"`
			} `json:"mapTimezones"`
		} `json:"windowsZones"`
	} `json:"supplemental"`
}

// parse returns the Windows name -> IANA zone of territory 001, and the
// CLDR release. A Windows name without a territory 001 entry, or with two,
// is an error: the data would not be what CLDR documents.
func parse(raw []byte) (map[string]string, string, error) {
	var f windowsZonesFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, "", err
	}
	zones := map[string]string{}
	seen := map[string]bool{}
	for _, m := range f.Supplemental.WindowsZones.MapTimezones {
		z := m.MapZone
		seen[z.Windows] = true
		if z.Territory != "001" {
			continue
		}
		if strings.Contains(z.IANA, " ") || z.IANA == "" {
			return nil, "", fmt.Errorf("%q of territory 001 maps to %q, want one zone", z.Windows, z.IANA)
		}
		if old, ok := zones[z.Windows]; ok {
			return nil, "", fmt.Errorf("%q has two zones of territory 001: %s and %s", z.Windows, old, z.IANA)
		}
		zones[z.Windows] = z.IANA
	}
	for w := range seen {
		if _, ok := zones[w]; !ok {
			return nil, "", fmt.Errorf("%q has no zone of territory 001", w)
		}
	}
	if len(zones) < 100 || f.Supplemental.Version.CLDR == "" {
		return nil, "", fmt.Errorf("found %d Windows zones and CLDR version %q: not the file expected", len(zones), f.Supplemental.Version.CLDR)
	}
	return zones, f.Supplemental.Version.CLDR, nil
}

// render writes the Go file of the table, sorted by Windows name.
func render(pkg, cldr, source string, zones map[string]string) ([]byte, error) {
	names := make([]string, 0, len(zones))
	for w := range zones {
		names = append(names, w)
	}
	slices.Sort(names)
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by go run ./internal/windowszones; DO NOT EDIT.\n\n")
	fmt.Fprintf(&b, "// Source: Unicode CLDR %s, supplemental/windowsZones.json of %s,\n", cldr, source)
	fmt.Fprintf(&b, "// the zone of territory 001 of each Windows time zone.\n\n")
	fmt.Fprintf(&b, "package %s\n\n", pkg)
	fmt.Fprintf(&b, "// windowsZonesCLDR is the CLDR release windowsZones comes from.\n")
	fmt.Fprintf(&b, "const windowsZonesCLDR = %q\n\n", cldr)
	fmt.Fprintf(&b, "// windowsZones maps a Windows time-zone name to its IANA zone.\n")
	fmt.Fprintf(&b, "var windowsZones = map[string]string{\n")
	for _, w := range names {
		fmt.Fprintf(&b, "\t%q: %q,\n", w, zones[w])
	}
	fmt.Fprintf(&b, "}\n")
	return format.Source(b.Bytes())
}
