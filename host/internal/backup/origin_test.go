package backup

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckOrigin(t *testing.T) {
	mine := "SHA256:mine"
	tests := []struct {
		name     string
		finger   string
		legacyOK bool
		want     string // "" for accepted
	}{
		{"same key", mine, false, ""},
		{"same key, flag given", mine, true, ""},
		{"missing fingerprint", "", false, "--legacy-backup"},
		{"missing fingerprint, legacy flag", "", true, ""},
		{"other key", "SHA256:theirs", false, "records SHA256:theirs"},
		{"other key, legacy flag does not help", "SHA256:theirs", true, "mismatch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckOrigin(Manifest{Format: Format, Fingerprint: tt.finger}, mine, tt.legacyOK)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}
