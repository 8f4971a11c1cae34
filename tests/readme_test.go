package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
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

// howToLines is how many lines of the README may come before "## Developing":
// the how-to a user reads; the internals live in docs/ (issue 40, item 10).
const howToLines = 300

// TestReadmeHowToFirst: everything before the README's "## Developing" is
// at most howToLines lines.
func TestReadmeHowToFirst(t *testing.T) {
	lines := strings.Split(readFile(t, "README.md"), "\n")
	n := slices.Index(lines, "## Developing")
	if n < 0 {
		t.Fatal(`the README has no "## Developing" section`)
	}
	if n > howToLines {
		t.Errorf("the README has %d lines before \"## Developing\", want at most %d: move internals to docs/", n, howToLines)
	}
}

// mdLink is a Markdown link's target: a relative path and an optional anchor.
var mdLink = regexp.MustCompile(`\]\(([^)#\s:]*)(?:#([^)\s]*))?\)`)

// TestReadmeDocsLinks: every relative link in the README and in docs/*.md
// names a file that exists (and, with an anchor, a heading of it), and every
// docs/*.md file is linked from the README.
func TestReadmeDocsLinks(t *testing.T) {
	root := moduleRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md")
	}
	linked := map[string]bool{}
	for _, f := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		rel, _ := filepath.Rel(root, f)
		for _, m := range mdLink.FindAllStringSubmatch(readFile(t, rel), -1) {
			target, anchor := m[1], m[2]
			if target == "" {
				target = filepath.Base(f)
			}
			path := filepath.Join(filepath.Dir(f), filepath.FromSlash(target))
			b, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%s links to %s: %v", rel, m[1], err)
				continue
			}
			if anchor != "" && !slices.Contains(anchors(string(b)), anchor) {
				t.Errorf("%s links to %s#%s: no such heading there", rel, m[1], anchor)
			}
			if rel == "README.md" {
				linked[filepath.Clean(path)] = true
			}
		}
	}
	for _, d := range docs {
		if !linked[filepath.Clean(d)] {
			t.Errorf("docs/%s is not linked from the README", filepath.Base(d))
		}
	}
}

// anchors are the GitHub anchors of a Markdown file's headings.
func anchors(md string) []string {
	var out []string
	for _, h := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(md, -1) {
		a := strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, h[1])
		out = append(out, a)
	}
	return out
}

// TestReadmeOneMakeTestFigure: the README and docs/ give how long `make test`
// takes in one sentence only, in the README's "Developing" (issue 40, item 10).
func TestReadmeOneMakeTestFigure(t *testing.T) {
	duration := regexp.MustCompile(`\d[\d,.]*(?:[–-]\d[\d,.]*)? ?(?:s|min|minutes|h|hours)\b`)
	root := moduleRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, f := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		rel, _ := filepath.Rel(root, f)
		text := strings.ReplaceAll(readFile(t, rel), "\n", " ")
		for _, s := range regexp.MustCompile(`[.;]\s`).Split(text, -1) {
			if strings.Contains(s, "`make test`") && duration.MatchString(s) {
				found = append(found, rel+": "+s)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d sentences give `make test` a duration, want one (in the README's Developing):\n%s", len(found), strings.Join(found, "\n"))
	}
	readme := readFile(t, "README.md")
	if dev := strings.Index(readme, "\n## Developing\n"); dev < 0 || !strings.HasPrefix(found[0], "README.md: ") ||
		strings.Index(strings.ReplaceAll(readme, "\n", " "), strings.TrimPrefix(found[0], "README.md: ")) < dev {
		t.Errorf("the `make test` figure is not in the README's Developing: %s", found[0])
	}
}

// readFile is the module's file rel.
func readFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
