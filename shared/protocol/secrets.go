package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// MaxSecretsBytes bounds the secrets document the agent's `secrets set`
// reads after the request line.
const MaxSecretsBytes = 64 << 10

// Secrets is what the host sends on stdin to `secrets set`: the guest
// variables of secret-env.txt with their values, resolved from the host's
// environment at every start. It is never logged, stored on the host or
// put in an argv.
type Secrets struct {
	Env map[string]string `json:"env"`
}

var secretName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// reservedSecret are guest variables a mapping may not replace: the
// supervisor sets them, or they change how every program runs.
var reservedSecret = map[string]bool{"PATH": true, "HOME": true, "USER": true, "SHELL": true, "HERMES_HOME": true, "IFS": true, "ENV": true, "BASH_ENV": true}

// CheckSecretName refuses a name that is not a plain variable name or that
// is reserved.
func CheckSecretName(name string) error {
	switch {
	case !secretName.MatchString(name):
		return fmt.Errorf("secret variable %q is not a valid name", name)
	case reservedSecret[name] || strings.HasPrefix(name, "LD_") || strings.HasPrefix(name, "HERMES_BOX_"):
		return fmt.Errorf("secret variable %q is reserved", name)
	}
	return nil
}

// Validate checks every name and value; errors name the variable, never
// the value.
func (s Secrets) Validate() error {
	var errs []error
	for _, k := range s.Names() {
		if err := CheckSecretName(k); err != nil {
			errs = append(errs, err)
		}
		if v := s.Env[k]; v == "" || strings.ContainsRune(v, 0) {
			errs = append(errs, fmt.Errorf("secret variable %q: empty or contains NUL", k))
		}
	}
	return errors.Join(errs...)
}

// Names returns the variable names, sorted.
func (s Secrets) Names() []string {
	out := make([]string, 0, len(s.Env))
	for k := range s.Env {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ReadSecrets decodes one bounded Secrets document from r and validates it.
func ReadSecrets(r io.Reader) (Secrets, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxSecretsBytes+1))
	if err != nil {
		return Secrets{}, fmt.Errorf("reading secrets: %w", err)
	}
	if len(b) > MaxSecretsBytes {
		return Secrets{}, fmt.Errorf("secrets document is larger than %d bytes", MaxSecretsBytes)
	}
	var s Secrets
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		// The decoder's message may quote input; name only the position.
		return Secrets{}, errors.New("secrets document is not a JSON object {\"env\":{NAME:VALUE}}")
	}
	if dec.More() {
		return Secrets{}, errors.New("trailing data after the secrets document")
	}
	return s, s.Validate()
}
