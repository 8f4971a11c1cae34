package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestReadSecrets(t *testing.T) {
	s, err := ReadSecrets(strings.NewReader(`{"env":{"OPENAI_API_KEY":"sk-x","B_2":"y"}}`))
	if err != nil || strings.Join(s.Names(), ",") != "B_2,OPENAI_API_KEY" {
		t.Fatalf("%v %v", s.Names(), err)
	}
	for _, bad := range []string{`{"env":{"1A":"x"}}`, `{"env":{"LD_PRELOAD":"x"}}`, `{"env":{"A":""}}`, `{"other":1}`, `{} {}`, ``} {
		if _, err := ReadSecrets(strings.NewReader(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzReadSecrets: whatever the input, an error never repeats a value and
// an accepted document has only valid names and values.
func FuzzReadSecrets(f *testing.F) {
	f.Add(`{"env":{"OPENAI_API_KEY":"sk-fuzz-value"}}`)
	f.Add(`{"env":{"PATH":"sk-fuzz-value"}}`)
	f.Add(`["sk-fuzz-value"]`)
	f.Fuzz(func(t *testing.T, doc string) {
		s, err := ReadSecrets(strings.NewReader(doc))
		if err != nil {
			var raw Secrets
			_ = json.Unmarshal([]byte(doc), &raw)
			for k, v := range raw.Env {
				if len(v) >= 4 && k != v && strings.Contains(err.Error(), v) && !strings.Contains(k, v) {
					t.Fatalf("error repeats the value of %q: %v", k, err)
				}
			}
			return
		}
		if verr := s.Validate(); verr != nil {
			t.Fatalf("accepted an invalid document: %v", verr)
		}
	})
}
