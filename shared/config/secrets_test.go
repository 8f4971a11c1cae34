package config

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLoadSecretMappings(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []SecretMapping
		wantErr string // PATH stands for the file's path
	}{
		{name: "empty", in: ""},
		{name: "comments and blank lines", in: "# header\n\n   \n  # indented\n"},
		{name: "mapping", in: "OPENAI_API_KEY=OPENAI_API_KEY\n", want: []SecretMapping{{"OPENAI_API_KEY", "OPENAI_API_KEY", 1}}},
		{
			name: "several mappings with line numbers",
			in:   "# c\nOPENAI_API_KEY=OPENAI_API_KEY\n\nTELEGRAM_BOT_TOKEN=HERMES_BOX_TELEGRAM_BOT_TOKEN\n",
			want: []SecretMapping{{"OPENAI_API_KEY", "OPENAI_API_KEY", 2}, {"TELEGRAM_BOT_TOKEN", "HERMES_BOX_TELEGRAM_BOT_TOKEN", 4}},
		},
		{name: "spaces and trailing comment", in: "  G = H  # note\r\n", want: []SecretMapping{{"G", "H", 1}}},
		{name: "hash cuts the line", in: "G=H#X=Y\n", want: []SecretMapping{{"G", "H", 1}}},
		{name: "command substitution", in: "G=H\n$(cat secret)\n", wantErr: "PATH:2: expected GUEST_VARIABLE=HOST_VARIABLE"},
		{name: "substitution as host", in: "G=$(cat secret)", wantErr: "PATH:1: expected GUEST_VARIABLE=HOST_VARIABLE"},
		{name: "no equals", in: "GUEST", wantErr: "PATH:1: expected GUEST_VARIABLE=HOST_VARIABLE"},
		{name: "empty host", in: "GUEST=", wantErr: "PATH:1: expected GUEST_VARIABLE=HOST_VARIABLE"},
		{name: "empty guest", in: "=HOST", wantErr: "PATH:1: expected GUEST_VARIABLE=HOST_VARIABLE"},
		{name: "second equals", in: "A=B=C", wantErr: "PATH:1: expected GUEST_VARIABLE=HOST_VARIABLE"},
		{name: "export prefix", in: "export A=B", wantErr: "PATH:1: expected GUEST_VARIABLE=HOST_VARIABLE"},
		{name: "quoted host", in: `A="B"`, wantErr: "PATH:1: expected GUEST_VARIABLE=HOST_VARIABLE"},
		{name: "secret value instead of a name", in: "OPENAI_API_KEY=sk-live-0123", wantErr: "PATH:1: expected GUEST_VARIABLE=HOST_VARIABLE"},
		{name: "duplicate guest", in: "A=B\nA=C", wantErr: `PATH:2: duplicate secret mapping for "A"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), SecretsFileName)
			writeFile(t, path, tt.in)
			got, err := LoadSecretMappings(path)
			if tt.wantErr != "" {
				want := strings.ReplaceAll(tt.wantErr, "PATH", path)
				if err == nil || err.Error() != want {
					t.Fatalf("LoadSecretMappings error = %v, want %q", err, want)
				}
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("error %v does not match ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadSecretMappings error: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("LoadSecretMappings = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestLoadSecretMappingsMissingFile(t *testing.T) {
	got, err := LoadSecretMappings(filepath.Join(t.TempDir(), "missing.txt"))
	if err != nil || got != nil {
		t.Errorf("LoadSecretMappings(missing) = %v, %v, want nil, nil", got, err)
	}
}

func TestCheckHost(t *testing.T) {
	const secret = "s3cret-value"
	env := map[string]string{"SET": secret, "EMPTY": "", "OTHER": secret}
	lookup := func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
	tests := []struct {
		name    string
		m       SecretMapping
		wantErr string
	}{
		{"set", SecretMapping{Guest: "G", Host: "SET"}, ""},
		{"unset", SecretMapping{Guest: "G", Host: "UNSET"},
			`host environment variable "UNSET" referenced by secret mapping for "G" is unset or empty`},
		{"empty", SecretMapping{Guest: "G", Host: "EMPTY"},
			`host environment variable "EMPTY" referenced by secret mapping for "G" is unset or empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.m.CheckHost(lookup)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckHost error: %v", err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("CheckHost error = %v, want %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("CheckHost error %q contains a secret value", err)
			}
			var cerr *Error
			if !errors.As(err, &cerr) || cerr.Key != tt.m.Host || !errors.Is(err, ErrInvalid) {
				t.Errorf("CheckHost error %#v is not an ErrInvalid *Error keyed %q", err, tt.m.Host)
			}
		})
	}
}

func TestCheckSecrets(t *testing.T) {
	lookup := func(k string) (string, bool) {
		if k == "SET" {
			return "v4lue", true
		}
		return "", false
	}
	tests := []struct {
		name    string
		ms      []SecretMapping
		wantErr string
	}{
		{"none", nil, ""},
		{"all set", []SecretMapping{{Guest: "A", Host: "SET"}, {Guest: "B", Host: "SET"}}, ""},
		{"two missing", []SecretMapping{{Guest: "A", Host: "X"}, {Guest: "B", Host: "SET"}, {Guest: "C", Host: "Y"}},
			"host environment variable \"X\" referenced by secret mapping for \"A\" is unset or empty\n" +
				"host environment variable \"Y\" referenced by secret mapping for \"C\" is unset or empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSecrets(tt.ms, lookup)
			if got := errString(err); got != tt.wantErr {
				t.Errorf("CheckSecrets error = %q, want %q", got, tt.wantErr)
			}
		})
	}
}

func TestSecretMappingString(t *testing.T) {
	if got := (SecretMapping{Guest: "G", Host: "H", Line: 3}).String(); got != "G=H" {
		t.Errorf("String = %q, want %q", got, "G=H")
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
