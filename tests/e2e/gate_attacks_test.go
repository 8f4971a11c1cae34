package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/health"
)

// gateAttackMarker is the file the agent's memory provider leaves when
// Hermes imports it (testdata/gate-attack.py writes it into the module).
const gateAttackMarker = "/tmp/hermes-box-e2e-agentmem-ran"

// plantedAttack is what testdata/gate-attack.py plant read back from disk.
type plantedAttack struct {
	EnvManagedDir  []string `json:"envManagedDir"`
	PolicyMode     string   `json:"policyMode"`
	UserMode       string   `json:"userMode"`
	MemoryProvider string   `json:"memoryProvider"`
	Provider       string   `json:"provider"`
}

// gatewayView is what the gate package's testdata/gateway_view.py prints:
// how Hermes, started as the gateway starts (.env loaded its way, the
// memory provider an agent would import loaded, plugins discovered),
// resolves the approval mode.
type gatewayView struct {
	Env            map[string]string `json:"env"`
	MemoryProvider string            `json:"memoryProvider"`
	MemoryLoaded   bool              `json:"memoryLoaded"`
	Mode           string            `json:"mode"`
}

// checkGateAttacks is issue 37's end-to-end case, after the gate step: as
// the hermes user the agent writes the .env attack (HERMES_MANAGED_DIR
// naming a policy directory of its own that says approvals.mode off, and
// mode off in its config.yaml) and the memory-provider attack (its own
// module under HERMES_HOME/plugins, named by memory.provider), and the
// gateway is restarted. Then Hermes' own code, started as the gateway
// starts, must still resolve the intended mode without importing the
// agent's module while status reports the gate healthy; or status must be
// unhealthy naming the gate (judgeGateAttack, judged once the attack is
// undone, so a failure leaves no attack behind). With the gateway
// restarted again the box must be healthy with the gate active, so the
// later phases see a normal box.
func (b *box) checkGateAttacks() {
	t := b.t
	const want = "smart" // Hermes 0.19.0's smart-plugin mechanism (wantGate)
	script := b.readRepo("tests/e2e/testdata/gate-attack.py")
	var planted plantedAttack
	b.gateAttack(script, "plant", &planted)
	policy := boxlayout.HermesHome + "/policy"
	mustf(t, slices.Equal(planted.EnvManagedDir, []string{policy}) && planted.PolicyMode == "off" && planted.UserMode == "off" &&
		planted.MemoryProvider == "agentmem" && planted.Provider == boxlayout.HermesHome+"/plugins/agentmem/__init__.py",
		"the attack as planted: %+v", planted)
	b.restartGateway()
	view := b.gatewayView()
	r := b.gateStatus()
	// undo says whether the marker was there: whether the agent's module
	// was imported by the gateway, the view or the health check.
	var undone struct {
		Undone bool `json:"undone"`
		Marker bool `json:"markerRemoved"`
	}
	b.gateAttack(script, "undo", &undone)
	mustf(t, undone.Undone, "gate-attack.py undo: %+v", undone)
	rep, err := health.Decode([]byte(r.Stdout))
	mustf(t, err == nil, "status --json after the attacks: exit %d: %v\n%s", r.Code, err, r.Stderr)
	outcome, err := judgeGateAttack(*rep, view, undone.Marker, want)
	if err != nil {
		t.Fatalf("after the agent's .env and memory-provider attacks: %v\ngateway view: %+v\nstatus --json:\n%s", err, view, r.Stdout)
	}
	t.Logf("after the agent's .env and memory-provider attacks (status exit %d): %s", r.Code, outcome)

	b.restartGateway()
	r = b.gateStatus()
	rep, err = health.Decode([]byte(r.Stdout))
	mustf(t, err == nil, "status --json after the undo: %v", err)
	mustf(t, rep.Status == health.StatusHealthy && gateHeld(*rep, want) == nil, "after the attacks are undone: %s %v\n%s", rep.Status, gateHeld(*rep, want), r.Stdout)
}

// gateStatus is status --json once the box answers with its gate check:
// after the gateway's restart with new files the gate's verdict is worked
// out again (Hermes asked under TCG), which can pass status's 30 s for its
// health call on a loaded machine; the call is asked again, up to 6 times
// 20 s apart, while the report has no gate check.
func (b *box) gateStatus() Result {
	var r Result
	for try := range 6 {
		if try > 0 {
			time.Sleep(20 * time.Second)
		}
		r = b.run(2*time.Minute, "status", "--json")
		if rep, err := health.Decode([]byte(r.Stdout)); err == nil {
			if _, ok := rep.Checks[health.CheckGate]; ok {
				return r
			}
		}
		b.t.Logf("status --json (try %d) has no gate check yet (exit %d)", try+1, r.Code)
	}
	return r
}

// judgeGateAttack says whether the box withstood the agent's attacks or
// reported them: rep is status --json afterwards, view what Hermes
// resolves when started as the gateway, marker whether the agent's module
// was imported, want the mechanism's intended mode. Either the gate held
// (the report healthy, its gate check healthy with the intended mode, and
// the gateway view the intended mode with none of the agent's code run) or
// the report is unhealthy with its gate check unhealthy; anything else is
// an error, above all an attack that worked while the health stayed green.
func judgeGateAttack(rep health.Report, view gatewayView, marker bool, want string) (string, error) {
	c, ok := rep.Checks[health.CheckGate]
	switch {
	case !ok:
		return "", errors.New("the report has no gate check")
	case c.Status == health.StatusUnhealthy && rep.Status == health.StatusUnhealthy:
		return "status is unhealthy naming the gate: " + c.Message, nil
	case c.Status != health.StatusHealthy:
		return "", fmt.Errorf("the gate check is %s (%s) in a report that is %s: neither held nor reported", c.Status, c.Message, rep.Status)
	}
	if err := gateHeld(rep, want); err != nil {
		return "", err
	}
	var bypassed []string
	if view.Mode != want {
		bypassed = append(bypassed, fmt.Sprintf("the gateway resolves approvals.mode %q, want %q", view.Mode, want))
	}
	if marker {
		bypassed = append(bypassed, fmt.Sprintf("Hermes imported the agent's memory provider %q (%s exists)", view.MemoryProvider, gateAttackMarker))
	}
	if len(bypassed) > 0 {
		return "", fmt.Errorf("the attack worked while the gate check stayed healthy (%s): %s", c.Message, strings.Join(bypassed, "; "))
	}
	if rep.Status != health.StatusHealthy {
		return "", fmt.Errorf("the gate held but the box is %s: %s", rep.Status, failing(rep))
	}
	return fmt.Sprintf("the gate held: the gateway resolves approvals.mode %s, memory.provider %q, the agent's module not imported; %s", view.Mode, view.MemoryProvider, c.Message), nil
}

// gateHeld checks that rep's gate check is healthy with Hermes resolving
// the intended mode want.
func gateHeld(rep health.Report, want string) error {
	c, g := rep.Checks[health.CheckGate], rep.Gate
	switch {
	case c.Status != health.StatusHealthy:
		return fmt.Errorf("the gate check is %s: %s", c.Status, c.Message)
	case g == nil:
		return errors.New("the gate check is healthy but the report has no gate object")
	case g.IntendedMode != want || g.EffectiveMode != want:
		return fmt.Errorf("the gate check is healthy with approvals.mode %q (intended %q), want %q", g.EffectiveMode, g.IntendedMode, want)
	}
	return nil
}

// failing lists the checks of rep that are not healthy.
func failing(rep health.Report) string {
	var out []string
	for code, c := range rep.Checks {
		if c.Status != health.StatusHealthy {
			out = append(out, fmt.Sprintf("%s %s: %s", code, c.Status, c.Message))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// gateAttack runs testdata/gate-attack.py verb as the hermes user and
// decodes its answer into out.
func (b *box) gateAttack(script []byte, verb string, out any) {
	r := b.runWith(nil, script, 2*time.Minute, "ssh", "--",
		"sudo -n -u hermes sh -c 'cd && exec python3 - "+verb+" "+boxlayout.HermesHome+" "+gateAttackMarker+"'")
	mustf(b.t, r.Code == 0 && json.Unmarshal([]byte(lastLine(r.Stdout)), out) == nil,
		"gate-attack.py %s as hermes: exit %d\n%s\n%s", verb, r.Code, r.Stdout, tailText(r.Stderr, 4000))
}

// restartGateway restarts the Hermes gateway as the host's tooling does:
// the agent's services verb, as root.
func (b *box) restartGateway() {
	b.e.Smolvm("machine", "exec", "--name", b.Machine, "--", boxlayout.AgentPath, "services", "restart", boxlayout.HermesService)
}

// gatewayView runs the gate package's testdata/gateway_view.py in the box
// as the supervisor starts the gateway (boot.GatewayEnv): the hermes user,
// its working directory, HERMES_HOME, HOME, PATH and git settings, and
// nothing else (the mapped secrets stay out of the command line).
func (b *box) gatewayView() gatewayView {
	script := b.readRepo("guest-agent/internal/gate/testdata/gateway_view.py")
	r := b.runWith(nil, script, 2*time.Minute, "ssh", "--", gatewayViewCommand())
	var v gatewayView
	mustf(b.t, r.Code == 0 && json.Unmarshal([]byte(lastLine(r.Stdout)), &v) == nil,
		"gateway_view.py as the gateway: exit %d\n%s\n%s", r.Code, r.Stdout, tailText(r.Stderr, 4000))
	return v
}

// shellSafe is an environment entry that needs no quoting in a shell word.
var shellSafe = regexp.MustCompile(`^[A-Z][A-Z0-9_]*=[A-Za-z0-9_./:-]*$`)

// gatewayViewCommand is the box command that runs a Python script on stdin
// with the installed Hermes' interpreter in the gateway's environment.
func gatewayViewCommand() string {
	env := append([]string{"HERMES_HOME=" + boxlayout.HermesHome, "HOME=" + boxlayout.ServiceHome, "PATH=" + boxlayout.GatewayPath,
		"PYTHONDONTWRITEBYTECODE=1"}, boxlayout.GatewayGitEnv()...)
	for _, kv := range env {
		if !shellSafe.MatchString(kv) {
			panic("gateway environment entry needs quoting: " + kv)
		}
	}
	return "sudo -n -u " + boxlayout.ServiceUser + " sh -c 'cd " + boxlayout.WorkDir + " && exec env -i " + strings.Join(env, " ") +
		" " + boxlayout.HermesVenv + "/bin/python - " + boxlayout.HermesTree + "'"
}

// readRepo reads a file of the repository.
func (b *box) readRepo(rel string) []byte {
	data, err := os.ReadFile(filepath.Join(b.e.Root, filepath.FromSlash(rel)))
	if err != nil {
		b.t.Fatal(err)
	}
	return data
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}
