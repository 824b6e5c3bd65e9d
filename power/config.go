package power

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
)

// Config is the --power-config file: the drivers pools may name.
//
//	drivers:
//	  - name: lab
//	    type: exec
//	    start: ["/usr/local/bin/vm", "start", "{host}"]
//	    stop: ["/usr/local/bin/vm", "stop", "{host}"]
//	    status: ["/usr/local/bin/vm", "status", "{host}"]   # optional
//	    timeout: 60s
//	  - name: cloud
//	    type: webhook
//	    url: https://power.example.com/hooks/vdi
//	    secretFile: /etc/vdibroker/power-hook.secret
//	    caFile: /etc/vdibroker/power-ca.pem                  # optional
//	  - name: demo
//	    type: simulated
//	    startDelay: 20s
type Config struct {
	Drivers []DriverConfig `yaml:"drivers"`
}

// DriverConfig is one driver of the file; which fields apply depends on
// Type.
type DriverConfig struct {
	Name    string `yaml:"name"`
	Type    string `yaml:"type"` // exec, webhook, simulated
	Timeout string `yaml:"timeout"`
	// exec
	Start  []string `yaml:"start"`
	Stop   []string `yaml:"stop"`
	Status []string `yaml:"status"`
	// webhook
	URL        string `yaml:"url"`
	SecretFile string `yaml:"secretFile"`
	CAFile     string `yaml:"caFile"`
	// simulated
	StartDelay string `yaml:"startDelay"`
}

// Driver types.
const (
	TypeExec      = "exec"
	TypeWebhook   = "webhook"
	TypeSimulated = "simulated"
)

// LoadFile reads and parses the config file at path (Parse).
func LoadFile(path string, log *slog.Logger) (Set, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("power config: %w", err)
	}
	set, err := Parse(b, log)
	if err != nil {
		return nil, fmt.Errorf("power config %s: %w", path, err)
	}
	return set, nil
}

// Parse builds the drivers of a config file. Every error names the driver
// and the field; unknown fields are errors (a misspelt "timout" must not
// silently mean the default).
func Parse(b []byte, log *slog.Logger) (Set, error) {
	var c Config
	if err := yaml.UnmarshalWithOptions(b, &c, yaml.DisallowUnknownField()); err != nil {
		return nil, fmt.Errorf("parse: %s", yaml.FormatError(err, false, true))
	}
	if log == nil {
		log = slog.Default()
	}
	set := Set{}
	for i, d := range c.Drivers {
		if d.Name == "" {
			return nil, fmt.Errorf("drivers[%d]: name is required", i)
		}
		if _, dup := set[d.Name]; dup {
			return nil, fmt.Errorf("driver %q: name: defined twice", d.Name)
		}
		drv, err := build(d, log)
		if err != nil {
			return nil, fmt.Errorf("driver %q: %w", d.Name, err)
		}
		set[d.Name] = drv
	}
	return set, nil
}

func build(d DriverConfig, log *slog.Logger) (Driver, error) {
	timeout, err := duration("timeout", d.Timeout, DefaultTimeout)
	if err != nil {
		return nil, err
	}
	unused := func(fields map[string]bool) error {
		for f, set := range fields {
			if set {
				return fmt.Errorf("%s: not a field of a %s driver", f, d.Type)
			}
		}
		return nil
	}
	switch d.Type {
	case TypeExec:
		if err := unused(map[string]bool{"url": d.URL != "", "secretFile": d.SecretFile != "", "caFile": d.CAFile != "", "startDelay": d.StartDelay != ""}); err != nil {
			return nil, err
		}
		for _, a := range []struct {
			field string
			argv  []string
			need  bool
		}{{"start", d.Start, true}, {"stop", d.Stop, true}, {"status", d.Status, false}} {
			if len(a.argv) == 0 {
				if a.need {
					return nil, fmt.Errorf("%s: an argv is required (a list: [program, arg...])", a.field)
				}
				continue
			}
			if a.argv[0] == "" || !strings.HasPrefix(a.argv[0], "/") {
				return nil, fmt.Errorf("%s: the program %q must be an absolute path (no shell, no PATH lookup)", a.field, a.argv[0])
			}
		}
		return &Exec{Name: d.Name, StartArgv: d.Start, StopArgv: d.Stop, StatusArgv: d.Status, Timeout: timeout,
			Log: log.With("component", "power")}, nil
	case TypeWebhook:
		if err := unused(map[string]bool{"start": len(d.Start) > 0, "stop": len(d.Stop) > 0, "status": len(d.Status) > 0, "startDelay": d.StartDelay != ""}); err != nil {
			return nil, err
		}
		u, err := url.Parse(d.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("url: %q is not an http(s) URL", d.URL)
		}
		w := &Webhook{Name: d.Name, URL: d.URL, Timeout: timeout}
		if d.SecretFile != "" {
			b, err := os.ReadFile(d.SecretFile)
			if err != nil {
				return nil, fmt.Errorf("secretFile: %w", err)
			}
			w.Secret = strings.TrimSpace(string(b))
			if w.Secret == "" {
				return nil, fmt.Errorf("secretFile: %s is empty", d.SecretFile)
			}
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if d.CAFile != "" {
			pem, err := os.ReadFile(d.CAFile)
			if err != nil {
				return nil, fmt.Errorf("caFile: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("caFile: %s holds no PEM certificate", d.CAFile)
			}
			tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		w.Client = &http.Client{Transport: tr, Timeout: timeout,
			// A redirect would resend the secret elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		return w, nil
	case TypeSimulated:
		if err := unused(map[string]bool{"start": len(d.Start) > 0, "stop": len(d.Stop) > 0, "status": len(d.Status) > 0,
			"url": d.URL != "", "secretFile": d.SecretFile != "", "caFile": d.CAFile != ""}); err != nil {
			return nil, err
		}
		delay, err := duration("startDelay", d.StartDelay, 0)
		if err != nil {
			return nil, err
		}
		return &Simulated{StartDelay: delay}, nil
	case "":
		return nil, errors.New("type: is required (exec, webhook or simulated)")
	}
	return nil, fmt.Errorf("type: %q is not one of exec, webhook, simulated", d.Type)
}

func duration(field, s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s: %q is not a duration such as 60s or 2m", field, s)
	}
	return d, nil
}
