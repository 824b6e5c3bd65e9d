package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/vdibroker/vdibroker"
)

// ReadPolicyFile reads the host's own thresholds (R-LI5) from a JSON file, or
// a YAML file when the name ends in .yaml or .yml:
//
//	{"hostLoadIndexThreshold": 80, "hostConnectingSessionThreshold": 5}
//
// Unknown keys and out-of-range values are errors naming the key. A file
// CheckFileTrusted refuses is not read (R-SEC): whoever may change it
// would set this host's thresholds, whose breach keeps the broker from
// placing sessions on it (R-LI5).
func ReadPolicyFile(path string) (*vdibroker.HostPolicy, error) {
	data, err := ReadTrustedFile(path)
	if errors.Is(err, ErrUntrusted) {
		return nil, fmt.Errorf("policy file %s: not read: %w, who could set this host's thresholds (R-LI5)", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	var p vdibroker.HostPolicy
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		err = yaml.UnmarshalWithOptions(data, &p, yaml.DisallowUnknownField())
	default:
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		err = dec.Decode(&p)
	}
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	if err := validatePolicy(&p); err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	return &p, nil
}

// validatePolicy checks the §6 ranges.
func validatePolicy(p *vdibroker.HostPolicy) error {
	if v := p.HostLoadIndexThreshold; v != nil && (*v < 0 || *v > 100) {
		return vdibroker.FieldError("hostLoadIndexThreshold", "%d is out of range 0..100", *v)
	}
	if v := p.HostConnectingSessionThreshold; v != nil && (*v < 0 || *v > 150) {
		return vdibroker.FieldError("hostConnectingSessionThreshold", "%d is out of range 0..150", *v)
	}
	return nil
}
