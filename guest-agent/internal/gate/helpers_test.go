package gate

import (
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/guest-agent/internal/hermestest"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// fixture returns a small tree holding the lines version's mechanism relies
// on: the gate's own excerpt for 0.19.0, the patch package's for 0.16/0.17,
// a bare pyproject for anything else.
func fixture(t testing.TB, version string) string {
	t.Helper()
	switch version {
	case "0.19.0", "0.18.2":
		return hermestest.CopyTree(t, hermestest.GateExcerpt(version))
	}
	dir := hermestest.CopyTree(t, hermestest.PatchTree)
	write(t, dir, "pyproject.toml", "[project]\nname = \"hermes-agent\"\nversion = \""+version+"\"\n")
	return dir
}

// write and read are the shared fixture helpers.
var (
	write = hermestest.WriteFile
	read  = hermestest.ReadFile
)

func release(t testing.TB, version string) pins.HermesRelease {
	t.Helper()
	h, err := pins.HermesByVersion(version)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func realTree(t *testing.T, version string) string {
	t.Helper()
	return hermestest.RealTree(t, version)
}

// alter changes one byte of the first occurrence of text in file.
func alter(t testing.TB, dir, file, text string) {
	t.Helper()
	src := read(t, dir, file)
	i := strings.Index(src, text)
	if i < 0 {
		t.Fatalf("%s does not hold %q", file, text)
	}
	j := i + len(text)/2
	for src[j] == ' ' || src[j] == '\n' {
		j++
	}
	write(t, dir, file, src[:j]+"\x7f"+src[j+1:])
}
