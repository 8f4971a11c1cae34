package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/host/internal/userr"
	"github.com/hermes-box/hermes-box/shared/bounded"
	"github.com/hermes-box/hermes-box/shared/health"
	"github.com/hermes-box/hermes-box/shared/netproof"
	"github.com/hermes-box/hermes-box/shared/protocol"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

// read calls v and returns its whole answer (at most v.Stdout bytes).
func (c *Client) read(ctx context.Context, v *Verb, args []string, stdin io.Reader) ([]byte, error) {
	out := bounded.NewBuffer(int(v.Stdout), "the answer of agent "+v.Name())
	err := c.Call(ctx, v, args, stdin, out)
	return out.Bytes(), err
}

// decode calls v and decodes its JSON answer into into.
func (c *Client) decode(ctx context.Context, v *Verb, stdin io.Reader, into any) error {
	b, err := c.read(ctx, v, nil, stdin)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, into); err != nil {
		return &NoAnswerError{Verb: v.Name(), Err: fmt.Errorf("decoding the answer of agent %s: %w", v.Name(), err)}
	}
	return nil
}

// Health is the agent's health report; deep also runs the installed tools.
func (c *Client) Health(ctx context.Context, deep bool) (*health.Report, error) {
	v := Health
	if deep {
		v = HealthDeep
	}
	b, err := c.read(ctx, v, nil, nil)
	if err != nil {
		return nil, err
	}
	r, err := health.Decode(b)
	if err != nil {
		return nil, &NoAnswerError{Verb: v.Name(), Err: err}
	}
	// Shown by status one per line: names and states stay one line.
	for i, s := range r.Services {
		r.Services[i].Name, r.Services[i].State = service(s.Name, s.State)
	}
	return r, nil
}

// ServicesStatus is the state of the box's supervised services.
func (c *Client) ServicesStatus(ctx context.Context) (protocol.ServicesStatus, error) {
	var st protocol.ServicesStatus
	if err := c.decode(ctx, ServicesStatus, nil, &st); err != nil {
		return st, err
	}
	for i, s := range st.Services {
		st.Services[i].Name, st.Services[i].State = service(s.Name, s.State)
	}
	return st, nil
}

// service is a service's name and state, each one line.
func service(name string, state health.ServiceState) (string, health.ServiceState) {
	return Line(name, MaxStepName), health.ServiceState(Line(string(state), 32))
}

// StopService stops a supervised service ("all" stops every one).
func (c *Client) StopService(ctx context.Context, name string) error {
	return c.Call(ctx, ServicesStop, []string{name}, nil, nil)
}

// StartService starts a supervised service.
func (c *Client) StartService(ctx context.Context, name string) error {
	return c.Call(ctx, ServicesStart, []string{name}, nil, nil)
}

// Logs writes the last lines of service's log to w, made safe to show
// (the log is the box's: shown, never obeyed), following it when follow
// is set.
func (c *Client) Logs(ctx context.Context, w io.Writer, service string, lines int, follow bool) error {
	v, args := Logs, []string{service, "-n", strconv.Itoa(lines)}
	if follow {
		v, args = LogsFollow, append(args, "-f")
	}
	safe := termsafe.NewWriter(w)
	err := c.Call(ctx, v, args, nil, safe)
	if ferr := safe.Flush(); err == nil {
		err = ferr
	}
	return err
}

// AuditRaw streams the exact bytes of the gate's audit log to w.
func (c *Client) AuditRaw(ctx context.Context, w io.Writer) error {
	return c.Call(ctx, AuditRaw, nil, nil, w)
}

// SetSecrets hands s to the agent, which keeps the variables on tmpfs and
// restarts the Hermes gateway with them; s travels on stdin only.
func (c *Client) SetSecrets(ctx context.Context, s protocol.Secrets) (protocol.SecretsStored, error) {
	var r protocol.SecretsStored
	doc, err := json.Marshal(s)
	if err != nil {
		return r, err
	}
	return r, c.decode(ctx, SecretsSet, bytes.NewReader(doc), &r)
}

// Netprobe runs the agent's probes of plan. The agent exits 1 when a probe
// contradicts the mode; its proof says so, and is returned either way.
func (c *Client) Netprobe(ctx context.Context, plan netproof.Plan) (netproof.Proof, error) {
	var proof netproof.Proof
	doc, err := json.Marshal(plan)
	if err != nil {
		return proof, err
	}
	b, err := c.read(ctx, Netprobe, nil, bytes.NewReader(doc))
	var exit *ExitError
	code := 0
	if errors.As(err, &exit) {
		code = exit.Code
	} else if err != nil {
		return proof, err
	}
	if jerr := json.Unmarshal(b, &proof); jerr != nil || (code != 0 && code != 1) {
		return netproof.Proof{}, fmt.Errorf("agent netprobe exited with status %d and no proof", code)
	}
	if len(proof.Probes) > maxProbes {
		return netproof.Proof{}, fmt.Errorf("agent netprobe answered %d probes, more than the %d a plan can ask for", len(proof.Probes), maxProbes)
	}
	// Kept and shown by status: each field one line.
	proof.Mode, proof.Time, proof.Unproven = Line(proof.Mode, 32), Line(proof.Time, 64), Line(proof.Unproven, maxFieldValue)
	for i, p := range proof.Probes {
		proof.Probes[i].Class = netproof.Class(Line(string(p.Class), 32))
		proof.Probes[i].Target, proof.Probes[i].Detail = Line(p.Target, 256), Line(p.Detail, maxFieldValue)
	}
	return proof, nil
}

// maxProbes bounds the probes of a proof (a plan has about ten).
const maxProbes = 256

// ExecutorStatus is the Executor's metadata; sizes also walks its
// directories for their disk use.
func (c *Client) ExecutorStatus(ctx context.Context, sizes bool) (protocol.ExecutorStatus, error) {
	v := ExecutorStatus
	if sizes {
		v = ExecutorStatusSizes
	}
	var st protocol.ExecutorStatus
	if err := c.decode(ctx, v, nil, &st); err != nil {
		return st, err
	}
	if len(st.Releases) > maxReleases {
		return st, fmt.Errorf("agent %s listed %d releases, more than %d", v.Name(), len(st.Releases), maxReleases)
	}
	if st.Current != nil {
		r := release(*st.Current)
		st.Current = &r
	}
	for i, r := range st.Releases {
		st.Releases[i] = release(r)
	}
	return st, nil
}

// maxReleases bounds the Executor releases a status lists (the store keeps
// a few).
const maxReleases = 256

// release is an Executor release with every field one line.
func release(r protocol.ExecutorRelease) protocol.ExecutorRelease {
	return protocol.ExecutorRelease{Name: Line(r.Name, 128), Dir: Line(r.Dir, maxFieldValue), ImageReference: Line(r.ImageReference, maxFieldValue),
		RepositoryDigest: Line(r.RepositoryDigest, maxFieldValue), ManifestDigest: Line(r.ManifestDigest, 128), Layout: Line(r.Layout, 32)}
}

// RefreshDiscovery has the agent restart the Hermes gateway once per boot
// so it discovers Executor's tools.
func (c *Client) RefreshDiscovery(ctx context.Context) (protocol.DiscoveryRefresh, error) {
	var r protocol.DiscoveryRefresh
	return r, c.decode(ctx, ExecutorRefresh, nil, &r)
}

// ConnectHermes registers Executor as Hermes' MCP server with key, which
// travels on stdin only.
func (c *Client) ConnectHermes(ctx context.Context, key string) error {
	return c.Call(ctx, ExecutorConnect, nil, bytes.NewReader([]byte(key+"\n")), nil)
}

// SnapshotWrite streams the snapshot part named part to w.
func (c *Client) SnapshotWrite(ctx context.Context, part string, w io.Writer) error {
	return c.Call(ctx, SnapshotWrite, []string{part}, nil, w)
}

// SnapshotChunks runs an incremental snapshot of part: held (what the
// host's store holds, chunkwire.Held) goes to the agent, and its chunk
// stream to w.
func (c *Client) SnapshotChunks(ctx context.Context, part string, held io.Reader, w io.Writer) error {
	return c.Call(ctx, SnapshotChunks, []string{part}, held, w)
}

// SnapshotApply streams a backup from r to the agent, which applies it.
func (c *Client) SnapshotApply(ctx context.Context, r io.Reader) error {
	return c.Call(ctx, SnapshotApply, nil, r, nil)
}

// Answers calls the agent's version verb: it returns nil once the agent
// answers (its answer is not used). version cannot fail: a failure that
// came with an answer on stdout is the agent's, and breaks the protocol
// (a NoAnswerError); one without (smolvm could not reach the agent yet)
// is an *ExitError.
func (c *Client) Answers(ctx context.Context) error {
	out, err := c.read(ctx, Version, nil, nil)
	if exit := (*ExitError)(nil); errors.As(err, &exit) && len(out) > 0 {
		return &NoAnswerError{Verb: Version.Name(), Err: fmt.Errorf("agent version answered and exited with status %d: %w", exit.Code, err)}
	}
	return err
}

// Netcheck asks a builder whether it has an IPv4 default route and DNS for
// the package host (host, when not empty, instead); the agent exits 1, an
// *ExitError saying why, when not (a failure without a result is smolvm's:
// the builder is not reachable yet). A netcheck that smolvm ended after
// NetcheckKill, or whose result is missing or disagrees with its exit
// status, is one the box did not answer (a NoAnswerError).
func (c *Client) Netcheck(ctx context.Context, host string) error {
	var args []string
	if host != "" {
		args = []string{"--host", host}
	}
	out, err := c.read(ctx, Netcheck, args, nil)
	if errors.Is(err, smolvm.ErrTimeout) {
		return &NoAnswerError{Verb: Netcheck.Name(), Late: true,
			Err: userr.WithHint(fmt.Errorf("the box did not answer agent %s within %v (smolvm ended it): %w", Netcheck.Name(), NetcheckKill, err), NextStep)}
	}
	var exit *ExitError
	if err != nil && !errors.As(err, &exit) || len(out) == 0 && exit != nil {
		return err
	}
	var r struct {
		Ready *bool `json:"ready"`
	}
	if jerr := json.Unmarshal(out, &r); jerr != nil {
		return &NoAnswerError{Verb: Netcheck.Name(), Err: fmt.Errorf("decoding the answer of agent %s: %w", Netcheck.Name(), jerr)}
	}
	if code := exitCode(err); r.Ready == nil || *r.Ready != (code == 0) || code > 1 {
		return &NoAnswerError{Verb: Netcheck.Name(), Err: fmt.Errorf("agent %s exited with status %d and no result that says so", Netcheck.Name(), code)}
	}
	return err
}

// exitCode is the status of an agent verb that ended with err (nil or an
// *ExitError).
func exitCode(err error) int {
	if exit := (*ExitError)(nil); errors.As(err, &exit) {
		return exit.Code
	}
	return 0
}

// HostKeys is the guest's SSH host keys, each field one line.
func (c *Client) HostKeys(ctx context.Context) (protocol.HostKeys, error) {
	var hk protocol.HostKeys
	if err := c.decode(ctx, HostKeys, nil, &hk); err != nil {
		return hk, err
	}
	if len(hk.Keys) > maxHostKeys {
		return protocol.HostKeys{}, fmt.Errorf("agent %s listed %d keys, more than %d", HostKeys.Name(), len(hk.Keys), maxHostKeys)
	}
	for i, k := range hk.Keys {
		hk.Keys[i] = protocol.HostKey{Type: Line(k.Type, 64), Path: Line(k.Path, maxFieldValue),
			Fingerprint: Line(k.Fingerprint, 128), PublicKey: Line(k.PublicKey, 16*int(kib))}
	}
	return hk, nil
}

// maxHostKeys bounds the host keys an answer lists (sshd has a few).
const maxHostKeys = 16

// ProvisionArgs is what provision is told: where the project's key was
// uploaded and which Hermes commit to install; the digests of artifacts
// the pins do not cover are given only when configured.
type ProvisionArgs struct {
	AuthorizedKeys string
	HermesCommit   string
	UVSHA256       string
	CodexSHA256    string
}

// argv is the flags of provision.
func (a ProvisionArgs) argv() []string {
	argv := []string{"--authorized-keys", a.AuthorizedKeys, "--hermes-commit", a.HermesCommit}
	if a.UVSHA256 != "" {
		argv = append(argv, "--uv-sha256", a.UVSHA256)
	}
	if a.CodexSHA256 != "" {
		argv = append(argv, "--codex-sha256", a.CodexSHA256)
	}
	return argv
}

// Provision installs the box (Hermes, its tools and services, the gate).
func (c *Client) Provision(ctx context.Context, a ProvisionArgs) error {
	return c.Call(ctx, Provision, a.argv(), nil, nil)
}
