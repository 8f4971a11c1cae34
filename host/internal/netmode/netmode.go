// Package netmode decides which network modes a box may use on the
// detected smolvm release, turns a mode into smolvm's egress flags for
// create --from, and proves the mode at every start: the agent's
// `netprobe` runs its probes inside the box and a contradiction stops the
// box with the probe named. Each machine's last proof is kept in the state
// dir for `status`.
package netmode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
	"github.com/hermes-box/hermes-box/shared/atomicfile"
	"github.com/hermes-box/hermes-box/shared/bounded"
	"github.com/hermes-box/hermes-box/shared/config"
	"github.com/hermes-box/hermes-box/shared/filenames"
	"github.com/hermes-box/hermes-box/shared/netproof"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// MaxProof bounds the proof file the host reads back: the agent client
// takes at most 64 KiB of proof, which indented stays well within it.
const MaxProof = 256 << 10

// Offer refuses a mode the release cannot enforce, with the reason.
func Offer(mode config.NetworkMode, r pins.SmolvmRelease, hosts []string) error {
	switch mode {
	case config.NetworkFull:
		return nil
	case config.NetworkStrict, config.NetworkNone:
	default:
		return fmt.Errorf("unknown HERMES_BOX_NETWORK_MODE %q", mode)
	}
	if !r.NetworkModesEnforced() {
		return fmt.Errorf("HERMES_BOX_NETWORK_MODE=%s is refused on smolvm %s: that release drops --allow-host/--outbound-localhost-only on machine create --from, so the box would have unrestricted egress; install smolvm %s (%s) or set HERMES_BOX_NETWORK_MODE=full",
			mode, r.Version, pins.SmolvmRecommended, pins.SmolvmInstallCommand(pins.SmolvmRecommended))
	}
	if mode == config.NetworkStrict && len(hosts) == 0 {
		return fmt.Errorf("HERMES_BOX_NETWORK_MODE=strict needs at least one host in %s", config.NetworkHostsFileName)
	}
	return nil
}

// Egress is the create --from policy of mode.
func Egress(mode config.NetworkMode, hosts []string) smolvm.Egress {
	switch mode {
	case config.NetworkStrict:
		return smolvm.Egress{AllowHosts: hosts}
	case config.NetworkNone:
		return smolvm.Egress{LocalhostOnly: true}
	}
	return smolvm.Egress{}
}

// Proven says whether a start must prove mode.
func Proven(mode config.NetworkMode) bool {
	return mode == config.NetworkStrict || mode == config.NetworkNone
}

// Prober is the agent's netprobe: its proof, whether the probes held or
// not; *agent.Client is one.
type Prober interface {
	Netprobe(ctx context.Context, plan netproof.Plan) (netproof.Proof, error)
}

// Stopper stops a machine; *smolvm.Driver is one.
type Stopper interface {
	Stop(ctx context.Context, name string) error
}

// Prove runs the agent's netprobe with plan over tr, checks a proof that
// holds against smolvm's egress denials (denials; nil on a release without
// them), records the proof in stateDir as machine's, and stops machine when a probe
// contradicts the mode (or no proof came back): the error then names the
// probe and says the box was stopped. With a nil stop the caller stops it.
// A proof smolvm's record does not confirm is kept as the box's word.
func Prove(ctx context.Context, call Prober, stop Stopper, stateDir, machine string, plan netproof.Plan, denials Denials) (netproof.Proof, error) {
	started := time.Now()
	proof, err := probe(ctx, call, plan)
	if err == nil {
		if cerr := proof.Covers(plan); cerr != nil {
			proof.Unproven = cerr.Error()
		}
		if proof.Verdict() == nil {
			corroborate(ctx, &proof, denials, started)
		} else {
			proof.Confirmed, proof.Evidence = false, ""
		}
		if serr := Save(stateDir, machine, proof); serr != nil {
			err = serr
		} else {
			err = proof.Verdict()
		}
	}
	if err == nil {
		return proof, nil
	}
	if stop == nil {
		return proof, err
	}
	if serr := stop.Stop(context.WithoutCancel(ctx), machine); serr != nil {
		return proof, errors.Join(fmt.Errorf("%w; stopping %s also failed", err, machine), serr)
	}
	return proof, fmt.Errorf("%w; %s was stopped", err, machine)
}

func probe(ctx context.Context, call Prober, plan netproof.Plan) (netproof.Proof, error) {
	proof, err := call.Netprobe(ctx, plan)
	if err != nil {
		return netproof.Proof{}, fmt.Errorf("proving network mode %s: %w", plan.Mode, err)
	}
	if proof.Mode != plan.Mode {
		return proof, fmt.Errorf("proving network mode %s: the agent proved %q", plan.Mode, proof.Mode)
	}
	return proof, nil
}

// Save writes machine's proof atomically to stateDir.
func Save(stateDir, machine string, p netproof.Proof) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(stateDir, filenames.NetworkProof(machine)), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("recording the network proof of %s: %w", machine, err)
	}
	return nil
}

// Forget removes machine's proof (a candidate's, with the candidate).
func Forget(stateDir, machine string) error {
	path := filepath.Join(stateDir, filenames.NetworkProof(machine))
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	return nil
}

// Last returns box's last recorded proof, or ok false when there is none.
// Until the box records one, the single proof file of earlier releases
// stands for it.
func Last(stateDir, box string) (p netproof.Proof, ok bool, err error) {
	p, ok, err = read(filepath.Join(stateDir, filenames.NetworkProof(box)))
	if ok || err != nil {
		return p, ok, err
	}
	return read(filepath.Join(stateDir, filenames.NetworkProofLegacy))
}

// read reads the proof at path, or ok false when there is none.
func read(path string) (p netproof.Proof, ok bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return p, false, nil
	}
	if err != nil {
		return p, false, err
	}
	defer f.Close()
	// The proof is the box's answer: read back bounded, as it was taken.
	b, err := bounded.ReadAll(f, MaxProof, path)
	if err != nil {
		return p, false, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, false, fmt.Errorf("%s: %w", path, err)
	}
	return p, true, nil
}

// Summary is one line for status: the mode and how the last proof ended.
func Summary(mode config.NetworkMode, p netproof.Proof, ok bool) string {
	if !Proven(mode) {
		return string(mode) + " (smolvm's strict egress floor where the release has it)"
	}
	if !ok {
		return string(mode) + ", not proven yet"
	}
	if err := p.Verdict(); err != nil {
		return fmt.Sprintf("%s, last proof %s FAILED: %v", mode, p.Time, err)
	}
	if !p.Confirmed {
		return fmt.Sprintf("%s, last proof %s reported by the box: %d probes held, not confirmed from outside it (%s)", mode, p.Time, len(p.Probes), p.Evidence)
	}
	return fmt.Sprintf("%s, last proof %s: %d probes held, confirmed by smolvm (%s)", mode, p.Time, len(p.Probes), p.Evidence)
}
