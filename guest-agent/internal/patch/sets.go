package patch

import (
	"embed"
	"fmt"
	"sort"
	"strings"
)

//go:embed hunks/*.pyfrag
var hunks embed.FS

// The files an anchor set edits.
const (
	approvalFile  = "tools/approval.py"
	gatewayFile   = "gateway/run.py"
	auxClientFile = "agent/auxiliary_client.py"
	// ModulePath is where the reviewer module is installed in the tree.
	ModulePath = "tools/gated_approval.py"
)

// Set is the list of anchors that patches one Hermes commit.
type Set struct {
	ID      string
	Anchors []Anchor
	// Reviewer is true when the set adds approvals.mode "gated": the
	// reviewer module is installed in the tree and its suite runs against
	// it. Sets without it (Hermes 0.19's container and service-tier edits)
	// only edit.
	Reviewer bool
}

// Files lists the files the set edits, in the order of its anchors.
func (s Set) Files() []string {
	var out []string
	seen := map[string]bool{}
	for _, a := range s.Anchors {
		if !seen[a.File] {
			seen[a.File] = true
			out = append(out, a.File)
		}
	}
	return out
}

// For returns the anchors that edit file.
func (s Set) For(file string) []Anchor {
	var out []Anchor
	for _, a := range s.Anchors {
		if a.File == file {
			out = append(out, a)
		}
	}
	return out
}

// hunk returns an embedded hunk; a missing one is a build error caught by
// the tests, so it panics.
func hunk(name string) string {
	b, err := hunks.ReadFile("hunks/" + name + ".pyfrag")
	if err != nil {
		panic(fmt.Sprintf("patch: missing hunk %s: %v", name, err))
	}
	return string(b)
}

// anchor builds an anchor whose marker is the hunk's "hermes-box:NAME" tag.
func anchor(file, label, before, after, name string) Anchor {
	h := hunk(name)
	marker := "hermes-box:" + name
	if name == "gate-decision" {
		marker += " begin"
	}
	if !strings.Contains(h, marker) {
		panic("patch: hunk " + name + " lacks its marker")
	}
	return Anchor{File: file, Label: label, Before: before, After: after, Hunk: h, Marker: marker}
}

// gatedAnchors is the anchor list verified (each exactly once) against
// NousResearch/hermes-agent at 81eaedd0 (0.16.0) and 2bd1977d (0.17.0):
// the text these anchors match is identical at both commits.
func gatedAnchors() []Anchor {
	return []Anchor{
		anchor(approvalFile, "gated decision insertion", "",
			"    # --- Phase 2.5: Smart approval (auxiliary LLM risk assessment) ---\n", "gate-decision"),
		anchor(approvalFile, "gateway verdict payload",
			"                \"allow_permanent\": not has_tirith,\n", "", "gate-payload"),
		anchor(approvalFile, "human escalation reason",
			"    combined_desc = \"; \".join(desc for _, desc, _ in warnings)\n", "", "gate-escalation"),
		anchor(gatewayFile, "gateway gated imports",
			"                register_gateway_notify,\n"+
				"                reset_current_session_key,\n"+
				"                set_current_session_key,\n"+
				"                unregister_gateway_notify,\n"+
				"            )\n", "", "gate-imports"),
		anchor(gatewayFile, "tool event capture",
			"        def progress_callback(event_type: str, tool_name: str = None, preview: str = None, args: dict = None, **kwargs):\n"+
				"            \"\"\"Callback invoked by agent on tool lifecycle events.\"\"\"\n", "", "gate-tool-events"),
		anchor(gatewayFile, "gateway context hydration",
			"            _approval_session_key = session_key or \"\"\n",
			"            _approval_session_token = set_current_session_key(_approval_session_key)\n", "gate-context"),
		anchor(gatewayFile, "gateway context reset",
			"                reset_current_session_key(_approval_session_token)\n", "", "gate-reset"),
		anchor(approvalFile, "hardline list judges the bare command",
			"            return (True, description)\n",
			"    return (False, None)\n\n\ndef _hardline_block_result(", "gate-bare-hardline"),
		anchor(approvalFile, "dangerous list judges the bare command",
			"            return (True, pattern_key, description)\n",
			"    return (False, None, None)\n\n\n# =========================================================================\n# Per-session approval state",
			"gate-bare-dangerous"),
		anchor(approvalFile, "approval settings from the managed file",
			"        config = load_config()\n", "        return config.get(\"approvals\", {}) or {}\n", "gate-managed-approvals"),
		anchor(approvalFile, "cron mode from the managed file",
			"        config = load_config()\n",
			"        mode = str(cfg_get(config, \"approvals\", \"cron_mode\", default=\"deny\")).lower().strip()\n",
			"gate-managed-cron"),
		anchor(approvalFile, "permanent allowlist from the managed file",
			"        config = load_config()\n", "        patterns = set(config.get(\"command_allowlist\", []) or [])\n",
			"gate-managed-allowlist"),
		noYoloAnchor(),
		containerGuards("    # Skip containers for both checks\n", "    if env_type in {\"docker\", \"singularity\", \"modal\", \"daytona\"}:\n"),
		containerDangerous("    if env_type in {\"docker\", \"singularity\", \"modal\", \"daytona\"}:\n"),
		containerExecute("    if env_type in {\"docker\", \"singularity\", \"modal\", \"daytona\", \"vercel_sandbox\"}:\n"),
		headlessGuards(),
		headlessExecute("gate-headless-execute-env"),
		headlessDangerous("        logger.warning(\n"+
			"            \"AUTO-APPROVED dangerous command in non-interactive non-gateway context \"\n", "gate-headless-dangerous-env"),
		anchor(auxClientFile, "Codex service tier forwarding",
			"                    resp_kwargs[\"include\"] = [\"reasoning.encrypted_content\"]\n\n",
			"        # Tools support for auxiliary callers (e.g. skills_hub) that pass function schemas\n", "gate-service-tier"),
	}
}

// The container-backend edits. Hermes approves every command outright on a
// container or cloud backend (docker, singularity, modal, daytona; and
// vercel_sandbox for execute_code), and takes the backend from TERMINAL_ENV,
// which it loads from $HERMES_HOME/.env, a file the agent can write, over
// any config, managed or not. The box runs none of those backends, so each
// approval entry point judges every command as on the local one: the hunk
// rebinds env_type just before the shortcut, which is the only place those
// functions read it. The anchors pin the shortcut itself, so a tree where
// it reads differently is refused.

// containerGuards edits check_all_command_guards, the terminal's guard:
// before is the line above its shortcut, skip the shortcut's first line.
func containerGuards(before, skip string) Anchor {
	return anchor(approvalFile, "terminal guard judges every backend as local", before, skip, "gate-container-guards")
}

// containerDangerous edits check_dangerous_command, whose shortcut (skip)
// is the one followed by its hardline floor.
func containerDangerous(skip string) Anchor {
	return anchor(approvalFile, "dangerous-command check judges every backend as local", "",
		skip+"        return {\"approved\": True, \"message\": None}\n\n    # Hardline floor: commands with no recovery path",
		"gate-container-dangerous")
}

// containerExecute edits check_execute_code_guard, before its shortcut.
func containerExecute(skip string) Anchor {
	return anchor(approvalFile, "execute_code guard judges every backend as local", "", skip, "gate-container-execute")
}

// noYoloAnchor switches off Hermes' process-wide yolo, which approves every
// flagged command (after the hardline floor) when HERMES_YOLO_MODE was set as
// tools.approval loaded: Hermes loads that variable from $HERMES_HOME/.env
// too. The line is the same on 0.16.0, 0.17.0 and 0.19.0; every other reader
// (the CLI, the TUI gateway, codex's bypass check) takes the frozen value.
func noYoloAnchor() Anchor {
	return anchor(approvalFile, "HERMES_YOLO_MODE ignored",
		"_YOLO_MODE_FROZEN: bool = is_truthy_value(os.getenv(\"HERMES_YOLO_MODE\", \"\"))\n", "", "gate-no-yolo")
}

// envSwitchAnchors019 are the yolo and container-backend edits on 0.19.0
// (verified on 3ef6bbd2), where _should_skip_container_guards decides
// (docker only without host bind mounts) and execute_code also skips
// vercel_sandbox on a line of its own.
func envSwitchAnchors019() []Anchor {
	const skip = "    if _should_skip_container_guards(env_type, has_host_access=has_host_access):\n"
	return []Anchor{
		noYoloAnchor(),
		containerGuards("    # once host paths are bind-mounted into the sandbox.\n", skip),
		containerDangerous(skip),
		containerExecute("    if env_type == \"vercel_sandbox\":\n        return {\"approved\": True, \"message\": None}\n"),
	}
}

// The headless edits. Outside the interactive CLI, the gateway and ask mode
// (`hermes -z`, which never sets HERMES_INTERACTIVE, or a script), Hermes
// approves every flagged command and every execute_code script outright:
// only the hardline floor applies. The agent can start such a run with a
// command no list flags, so each entry point denies there instead (fail
// closed); the reviewer is not asked, as whatever it does not approve has no
// human to go to. The anchors pin the branch that approves outright.

// headlessGuards edits check_all_command_guards, the terminal's guard, at
// the top of its branch for runs that are neither CLI, gateway nor ask mode
// (the same text on 0.16.0, 0.17.0 and 0.19.0).
func headlessGuards() Anchor {
	return anchor(approvalFile, "terminal guard denies flagged commands in a headless run",
		"    if not is_cli and not is_gateway and not is_ask:\n", "        # Cron sessions: respect cron_mode config\n",
		"gate-headless-guards")
}

// headlessExecute edits check_execute_code_guard before the line that
// approves every script outside the gateway and ask mode. The hunk (name)
// tells the CLI as the release does: 0.19.0's _is_interactive_cli also reads
// the ACP sessions' context flag, which 0.16.0 and 0.17.0 lack.
func headlessExecute(name string) Anchor {
	return anchor(approvalFile, "execute_code guard denies scripts in a headless run",
		"    #   * Local non-interactive non-gateway: documented limitation above.\n",
		"    if not is_gateway and not is_ask:\n        return {\"approved\": True, \"message\": None}\n", name)
}

// headlessDangerous edits check_dangerous_command before the line that
// approves outright where no one can approve: on 0.16.0 and 0.17.0 the hunk
// returns a denial before its warning; on 0.19.0, which hands the decision to
// _run_approval_gate, it turns on the gate's own fail-closed flag for that
// case (after its cron branch, which the managed cron_mode: deny pins).
func headlessDangerous(after, name string) Anchor {
	return anchor(approvalFile, "dangerous-command check denies in a headless run", "", after, name)
}

// serviceTierAnchor is the source edit on Hermes 0.19.0 whose
// auxiliary Codex adapter still drops extra_body.service_tier: the anchor
// text is unchanged from 0.16.0 (verified on 3ef6bbd2).
func serviceTierAnchor() Anchor {
	for _, a := range gatedAnchors() {
		if a.File == auxClientFile {
			return a
		}
	}
	panic("patch: no service-tier anchor")
}

var sets = map[string]Set{
	"hermes-0.16.0": {ID: "hermes-0.16.0", Anchors: append(gatedAnchors(), inputAnchors(false)...), Reviewer: true},
	"hermes-0.17.0": {ID: "hermes-0.17.0", Anchors: append(gatedAnchors(), inputAnchors(true)...), Reviewer: true},
	"hermes-0.19.0": {ID: "hermes-0.19.0", Anchors: append(append(envSwitchAnchors019(),
		headlessGuards(), headlessExecute("gate-headless-execute-ctx"),
		headlessDangerous("        autoapprove_log_prefix=(\n"+
			"            \"AUTO-APPROVED dangerous command in non-interactive non-gateway context\"\n", "gate-headless-dangerous-ctx"),
		serviceTierAnchor()), inputAnchors(true)...)},
}

// SetByID returns the anchor set with the given id.
func SetByID(id string) (Set, error) {
	s, ok := sets[id]
	if !ok {
		return Set{}, fmt.Errorf("no gated-approval anchor set %q", id)
	}
	return s, nil
}

// Sets returns every anchor set, by id.
func Sets() []Set {
	out := make([]Set, 0, len(sets))
	for _, s := range sets {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
