package pins

import (
	"os"
	"regexp"
	"testing"
)

// TestSmolfileMatchesPins keeps the Smolfile's image and entrypoint in step
// with the table and the agent's boot verb.
func TestSmolfileMatchesPins(t *testing.T) {
	b, err := os.ReadFile("../../Smolfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`(?m)^image = "` + regexp.QuoteMeta(UbuntuImage) + `"$`,
		`(?m)^entrypoint = \["/usr/local/sbin/hermes-box-agent"\]$`,
		`(?m)^cmd = \["boot"\]$`,
	} {
		if !regexp.MustCompile(want).Match(b) {
			t.Errorf("Smolfile does not match %s", want)
		}
	}
}
