package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hermes-box/hermes-box/guest-agent/internal/audit"
	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

// auditResult is what `audit verify --json` prints; `audit show --json`
// adds the entries.
type auditResult struct {
	File    string         `json:"file"`
	OK      bool           `json:"ok"`
	Count   int            `json:"entries"`
	Head    string         `json:"head,omitempty"`
	Broken  *auditBreak    `json:"broken,omitempty"`
	Records []audit.Record `json:"records,omitempty"`
}

type auditBreak struct {
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

func runAudit(_ context.Context, e *env, args []string) error {
	if len(args) == 0 || (args[0] != "verify" && args[0] != "show" && args[0] != "raw") {
		return usageError("audit: want verify, show or raw")
	}
	sub := args[0]
	if sub == "raw" {
		return rawAudit(e, args[1:])
	}
	fs := newFlags(e, "audit "+sub, "[--json] [--file PATH]")
	asJSON := fs.Bool("json", false, "print JSON")
	file := fs.String("file", "", "audit log (default <root>"+boxlayout.GateAuditLog+")")
	if err := parseFlags(fs, args[1:], 0); err != nil {
		return err
	}
	if *file == "" {
		*file = filepath.Join(e.root, boxlayout.GateAuditLog)
	}
	res, err := verifyLog(*file)
	if err != nil {
		return err
	}
	if sub == "verify" && !*asJSON {
		res.Records = nil
	}
	if err := printAudit(e, sub, res, *asJSON); err != nil {
		return err
	}
	if !res.OK {
		return &exitError{code: 1, err: fmt.Errorf("%s: audit chain broken at line %d: %s", res.File, res.Broken.Line, res.Broken.Reason)}
	}
	return nil
}

func verifyLog(path string) (auditResult, error) {
	res := auditResult{File: path, OK: true}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return res, nil // no verdict has been logged yet
	}
	if err != nil {
		return res, fmt.Errorf("reading audit log: %w", err)
	}
	defer f.Close()
	recs, err := audit.Verify(f)
	var ce *audit.ChainError
	switch {
	case errors.As(err, &ce):
		res.OK, res.Broken = false, &auditBreak{Line: ce.Line, Reason: ce.Reason}
	case err != nil:
		return res, err
	}
	res.Records, res.Count = recs, len(recs)
	if len(recs) > 0 {
		res.Head = recs[len(recs)-1].Hash
	}
	return res, nil
}

func printAudit(e *env, sub string, res auditResult, asJSON bool) error {
	if asJSON {
		if sub == "verify" {
			res.Records = nil
		}
		return json.NewEncoder(e.Out).Encode(res)
	}
	if sub == "show" {
		for _, r := range res.Records {
			x := r.Entry
			// The command and the reason come from what the model was
			// asked to run: shown, never obeyed.
			fmt.Fprintf(e.Out, "%4d %s %-8s risk=%-8s conf=%.2f %s\n       %s\n",
				termsafe.Args(x.Seq, x.Time, x.Decision, x.Risk, x.Confidence, x.Command, x.Reason)...)
		}
	}
	if res.OK {
		_, err := fmt.Fprintf(e.Out, "audit log %s: %d entries, chain intact\n", res.File, res.Count)
		return err
	}
	_, err := fmt.Fprintf(e.Out, "audit log %s: chain BROKEN at line %d: %s\n", res.File, res.Broken.Line, termsafe.String(res.Broken.Reason))
	return err
}

// rawAudit prints the log's exact bytes (nothing when there is no log yet):
// the host verifies the chain itself and checks that it extends the head it
// recorded last time.
func rawAudit(e *env, args []string) error {
	flags := newFlags(e, "audit raw", "[--file PATH]")
	file := flags.String("file", "", "audit log (default <root>"+boxlayout.GateAuditLog+")")
	if err := parseFlags(flags, args, 0); err != nil {
		return err
	}
	if *file == "" {
		*file = filepath.Join(e.root, boxlayout.GateAuditLog)
	}
	f, err := os.Open(*file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading audit log: %w", err)
	}
	defer f.Close()
	if _, err := io.Copy(e.Out, f); err != nil {
		return fmt.Errorf("printing audit log: %w", err)
	}
	return nil
}
