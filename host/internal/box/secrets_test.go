package box

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/boxtest"
)

// TestSecretsAndDocuments: a secret mapped by name reaches the gateway
// through the agent (never argv, the smolvm log or what the verbs render)
// at init's first start and at every start after, a start without the
// host's variable changes nothing, and init copies the documents.
func TestSecretsAndDocuments(t *testing.T) {
	p := newProject(t)
	p.Write("secret-env.txt", "OPENAI_API_KEY=HBX_TEST_SECRET\n")
	p.Write("docs/SOUL.md", "be kind\n")
	const secret = "sk-very-secret-value"
	t.Setenv("HBX_TEST_SECRET", secret)
	doc := filepath.Join(p.Root, "docs", "SOUL.md")

	calls, err := p.do(func(ctx context.Context, b *Box) error { return Init(ctx, b, []string{doc}) })
	if err != nil {
		t.Fatalf("init: %v\n%s", err, p.ui.text())
	}
	p.expectPlan([]string{doc})
	if !slices.Contains(boxtest.Lines(calls), "machine cp $ROOT/docs/SOUL.md hermes-box:/workspace/work/SOUL.md") {
		t.Errorf("the document was not copied:\n  %s", strings.Join(boxtest.Lines(calls), "\n  "))
	}
	root := filepath.Join(p.State, "machines", boxtest.Machine, "root")
	if got := boxtest.ReadFile(t, filepath.Join(root, "workspace", "work", "SOUL.md")); string(got) != "be kind\n" {
		t.Errorf("document in the box: %q", got)
	}
	gateway := func() {
		t.Helper()
		sum := sha256.Sum256([]byte(secret))
		if got := boxtest.ReadFile(t, filepath.Join(root, "run", "hbx-test-gateway-secret")); string(got) != hex.EncodeToString(sum[:]) {
			t.Errorf("the gateway's OPENAI_API_KEY digest %s, want the secret's", got)
		}
	}
	gateway()

	if _, err := p.do(Stop); err != nil {
		t.Fatal(err)
	}
	boxtest.Must(t, os.RemoveAll(filepath.Join(root, "run", "hermes-box-secrets")))
	boxtest.Must(t, os.Remove(filepath.Join(root, "run", "hbx-test-gateway-secret")))
	t.Setenv("HBX_TEST_SECRET", "")
	calls, err = p.do(Start)
	if err == nil || !strings.Contains(err.Error(), `"HBX_TEST_SECRET" referenced by secret mapping for "OPENAI_API_KEY" is unset or empty`) ||
		slices.Contains(boxtest.Lines(calls), "machine start --name hermes-box") {
		t.Fatalf("start without the host variable: %v %v", err, boxtest.Lines(calls))
	}
	t.Setenv("HBX_TEST_SECRET", secret)
	if _, err := p.do(Start); err != nil {
		t.Fatalf("start: %v", err)
	}
	gateway()
	if strings.Contains(string(boxtest.ReadFile(t, p.Log)), secret) || strings.Contains(p.ui.text(), secret) {
		t.Fatal("the secret's value reached argv, the smolvm log or what the verbs rendered")
	}
}
