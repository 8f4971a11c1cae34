package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// firstScreen is how many lines of the README a newcomer reads first.
const firstScreen = 60

// TestReadmeNewcomerOrder: the README's first screen installs smolvm, then
// runs make init, then opens the first session, in that order; make test
// is there but not as a set-up step; there is one "Inside the box"; the
// example files it names exist (issue 27, finding 12).
func TestReadmeNewcomerOrder(t *testing.T) {
	root := moduleRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	lines := strings.Split(text, "\n")
	screen := strings.Join(lines[:min(firstScreen, len(lines))], "\n")
	last := -1
	for _, step := range []string{"brew install smol-machines/tap/smolvm", "sha256sum -c", "make init", "hermes-box ssh", "make test"} {
		i := strings.Index(screen, step)
		if i < 0 || i < last {
			t.Errorf("the first %d lines of the README do not have %q after the step before it", firstScreen, step)
		}
		last = i
	}
	if n := len(regexp.MustCompile(`(?m)^## Inside the box$`).FindAllString(text, -1)); n != 1 {
		t.Errorf("%d sections \"Inside the box\", want one", n)
	}
	for _, f := range regexp.MustCompile("`([a-z.-]+\\.example)`").FindAllStringSubmatch(screen, -1) {
		if _, err := os.Stat(filepath.Join(root, f[1])); err != nil {
			t.Errorf("the README names %s: %v", f[1], err)
		}
	}
}
