//go:build linux

package agent_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/box"
	"github.com/hermes-box/hermes-box/host/internal/keys"
	"github.com/hermes-box/hermes-box/host/internal/progress"
	"github.com/hermes-box/hermes-box/host/internal/relay"
	"github.com/hermes-box/hermes-box/shared/netproof"
	"github.com/hermes-box/hermes-box/shared/protocol"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

// The host of the hostile matrix: this test binary run as
// `BIN hbx-matrix-host VERB MODE`, calling one verb through the door over
// the real SSH relay as the host's commands use it, its events rendered in
// plain text on stderr and its answer printed on stdout, the final error
// too, as hermes-box prints them.

// use is how the host uses a verb's answer: the typed call, and what of
// the answer a command prints.
type use func(ctx context.Context, c *agent.Client, w io.Writer) error

// uses has an entry for every verb of the table; the matrix fails for a
// verb without one, so that a verb added later is covered the day it is.
var uses = map[*agent.Verb]use{
	agent.Health:     func(ctx context.Context, c *agent.Client, w io.Writer) error { return printHealth(ctx, c, w, false) },
	agent.HealthDeep: func(ctx context.Context, c *agent.Client, w io.Writer) error { return printHealth(ctx, c, w, true) },
	agent.ServicesStatus: func(ctx context.Context, c *agent.Client, w io.Writer) error {
		st, err := c.ServicesStatus(ctx)
		for _, s := range st.Services {
			fmt.Fprintf(w, "%s %s\n", s.Name, s.State)
		}
		return err
	},
	agent.ServicesStop:  func(ctx context.Context, c *agent.Client, _ io.Writer) error { return c.StopService(ctx, "all") },
	agent.ServicesStart: func(ctx context.Context, c *agent.Client, _ io.Writer) error { return c.StartService(ctx, "hermes") },
	agent.Logs: func(ctx context.Context, c *agent.Client, w io.Writer) error {
		return c.Logs(ctx, w, "hermes", 100, false)
	},
	agent.LogsFollow: func(ctx context.Context, c *agent.Client, w io.Writer) error {
		// Ctrl-C ends a follow: here, after followFor.
		ctx, cancel := context.WithTimeout(ctx, followFor)
		defer cancel()
		err := c.Logs(ctx, w, "hermes", 100, true)
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return nil
		}
		return err
	},
	agent.AuditRaw: func(ctx context.Context, c *agent.Client, w io.Writer) error {
		res, err := box.CheckAudit(ctx, c, os.Getenv(envAnchor), true)
		if err != nil {
			return err
		}
		if !res.OK {
			fmt.Fprintf(os.Stderr, "hermes-box: %s\n", termsafe.String(res.Err().Error()))
		}
		return res.WriteText(w, true)
	},
	agent.SecretsSet: func(ctx context.Context, c *agent.Client, w io.Writer) error {
		r, err := c.SetSecrets(ctx, protocol.Secrets{Env: map[string]string{"OPENAI_API_KEY": "sk-matrix"}})
		fmt.Fprintf(w, "stored %d\n", len(r.Names))
		return err
	},
	agent.Netprobe: func(ctx context.Context, c *agent.Client, w io.Writer) error {
		p, err := c.Netprobe(ctx, netproof.DefaultPlan(netproof.ModeNone, nil, 2222))
		fmt.Fprintf(w, "network %s, last proof %s: %d probes\n", p.Mode, p.Time, len(p.Probes))
		for _, pr := range p.Probes {
			fmt.Fprintf(w, "  %s %s %s\n", pr.Class, pr.Target, pr.Detail)
		}
		return err
	},
	agent.ExecutorStatus:      func(ctx context.Context, c *agent.Client, w io.Writer) error { return printExecutor(ctx, c, w, false) },
	agent.ExecutorStatusSizes: func(ctx context.Context, c *agent.Client, w io.Writer) error { return printExecutor(ctx, c, w, true) },
	agent.ExecutorRefresh: func(ctx context.Context, c *agent.Client, w io.Writer) error {
		r, err := c.RefreshDiscovery(ctx)
		fmt.Fprintf(w, "restarted %t\n", r.Restarted)
		return err
	},
	agent.ExecutorConnect: func(ctx context.Context, c *agent.Client, _ io.Writer) error {
		return c.ConnectHermes(ctx, "sk-matrix")
	},
	agent.SnapshotWrite: func(ctx context.Context, c *agent.Client, _ io.Writer) error {
		return c.SnapshotWrite(ctx, "rootfs", io.Discard)
	},
	agent.SnapshotChunks: func(ctx context.Context, c *agent.Client, _ io.Writer) error {
		return c.SnapshotChunks(ctx, "rootfs", strings.NewReader("HBXHELD1"), io.Discard)
	},
	agent.SnapshotApply: func(ctx context.Context, c *agent.Client, _ io.Writer) error {
		return c.SnapshotApply(ctx, strings.NewReader(strings.Repeat("t", 64<<10)))
	},
	agent.Version:  func(ctx context.Context, c *agent.Client, _ io.Writer) error { return c.Answers(ctx) },
	agent.Netcheck: func(ctx context.Context, c *agent.Client, _ io.Writer) error { return c.Netcheck(ctx, "") },
	agent.HostKeys: func(ctx context.Context, c *agent.Client, w io.Writer) error {
		hk, err := c.HostKeys(ctx)
		for _, k := range hk.Keys {
			fmt.Fprintf(w, "%s %s %s\n", k.Type, k.Path, k.Fingerprint)
		}
		return err
	},
	agent.Provision: func(ctx context.Context, c *agent.Client, _ io.Writer) error {
		return c.Provision(ctx, agent.ProvisionArgs{AuthorizedKeys: "/tmp/k", HermesCommit: "0123456789abcdef0123456789abcdef01234567"})
	},
}

// followFor is how long the matrix follows a log before its Ctrl-C.
const followFor = 3 * time.Second

func printHealth(ctx context.Context, c *agent.Client, w io.Writer, deep bool) error {
	r, err := c.Health(ctx, deep)
	if err != nil {
		return err
	}
	for _, s := range r.Services {
		fmt.Fprintf(w, "  service %s\t%s\n", s.Name, s.State)
	}
	return nil
}

func printExecutor(ctx context.Context, c *agent.Client, w io.Writer, sizes bool) error {
	st, err := c.ExecutorStatus(ctx, sizes)
	if st.Current != nil {
		fmt.Fprintf(w, "Image:      %s\nDigest:     %s\n", st.Current.ImageReference, st.Current.ManifestDigest)
	}
	return err
}

// matrixHost runs verb (its index in agent.Verbs) calls times in one
// process, as the matrix's environment says.
func matrixHost(verb, calls int) int {
	shorten, err := time.ParseDuration(os.Getenv(envDeadline))
	if err != nil {
		fmt.Fprintln(os.Stderr, "matrix host:", err)
		return 2
	}
	signer, err := keys.EnsureProjectKey(os.Getenv(envKey), "")
	if err != nil {
		fmt.Fprintln(os.Stderr, "matrix host:", err)
		return 2
	}
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(os.Getenv(envHostKey)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "matrix host:", err)
		return 2
	}
	v := agent.Verbs[verb]
	ui := progress.NewMode(os.Stderr, progress.Plain)
	for call := range calls {
		tr := &relay.SSH{Addr: os.Getenv(envAddr), User: os.Getenv(envUser), Signer: signer, HostKey: hostKey,
			Command: os.Getenv(envCommand) + " " + fmt.Sprint(call)}
		if err := uses[v](context.Background(), agent.Shortened(agent.New(tr, ui.Event), shorten), os.Stdout); err != nil {
			// As hermes-box prints a final error.
			fmt.Fprintf(os.Stderr, "hermes-box: %v\n", err)
		}
	}
	// Its own peak, read last: the rusage of a child counts the test
	// binary's memory it was forked from.
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		fmt.Fprintln(os.Stderr, "matrix host:", err)
		return 2
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			if err := os.WriteFile(os.Getenv(envHWM), []byte(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "matrix host:", err)
				return 2
			}
		}
	}
	return 0
}
