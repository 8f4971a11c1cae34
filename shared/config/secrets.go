package config

import (
	"errors"
	"fmt"
	"strings"
)

// SecretMapping is one GUEST=HOST line of secret-env.txt: when a machine is
// created, the guest variable Guest receives the value of the host variable
// Host. The mapping holds names only, never the secret.
type SecretMapping struct {
	Guest string
	Host  string
	Line  int // 1-based line in secret-env.txt
}

// String returns "GUEST=HOST", the argument of smolvm's --secret-env.
func (m SecretMapping) String() string {
	return m.Guest + "=" + m.Host
}

// LoadSecretMappings reads a secret-env.txt file. On each line everything
// from the first "#" is a comment; blank lines are skipped; every other line
// must be GUEST=HOST with two valid variable names and a guest variable not
// mapped before. Errors name the line but never repeat its text. A missing
// file yields no mappings.
func LoadSecretMappings(path string) ([]SecretMapping, error) {
	var out []SecretMapping
	seen := make(map[string]bool)
	err := readListFile(path, "secret mappings", func(line int, text string) error {
		guest, host, ok := strings.Cut(text, "=")
		m := SecretMapping{Guest: strings.TrimSpace(guest), Host: strings.TrimSpace(host), Line: line}
		switch {
		case !ok || !validName(m.Guest) || !validName(m.Host):
			return &Error{File: path, Line: line, Msg: "expected GUEST_VARIABLE=HOST_VARIABLE"}
		case seen[m.Guest]:
			return &Error{File: path, Line: line, Key: m.Guest, Msg: fmt.Sprintf("duplicate secret mapping for %q", m.Guest)}
		}
		seen[m.Guest] = true
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CheckHost returns an *Error unless lookup reports m.Host set and non-empty.
// lookup has the signature of os.LookupEnv. The error names the variables,
// never the value.
func (m SecretMapping) CheckHost(lookup func(string) (string, bool)) error {
	if v, ok := lookup(m.Host); ok && v != "" {
		return nil
	}
	return &Error{Key: m.Host, Msg: fmt.Sprintf(
		"host environment variable %q referenced by secret mapping for %q is unset or empty", m.Host, m.Guest)}
}

// CheckSecrets runs CheckHost on every mapping and joins the errors.
func CheckSecrets(mappings []SecretMapping, lookup func(string) (string, bool)) error {
	var errs []error
	for _, m := range mappings {
		errs = append(errs, m.CheckHost(lookup))
	}
	return errors.Join(errs...)
}
