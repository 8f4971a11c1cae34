package gate

import (
	"fmt"
	"slices"

	"github.com/hermes-box/hermes-box/guest-agent/internal/patch"
	"github.com/hermes-box/hermes-box/shared/pins"
)

// Kinds of requirement.
const (
	KindAnchor = "anchor" // text a source edit of the mechanism is inserted at
	KindHook   = "hook"   // a plugin hook and its dispatch
	KindSeam   = "seam"   // a name the plugin wraps, or its call site
	KindConfig = "config" // a config key and its default, or the code reading it
	KindFlag   = "flag"   // a command-line flag the box passes
)

// Requirement is one text a mechanism relies on in a Hermes tree; it must
// occur exactly once in File.
type Requirement struct {
	Kind  string `json:"kind"`
	File  string `json:"file"`
	Label string `json:"label"`
	Text  string `json:"-"`
}

const (
	approvalPy = "tools/approval.py"
	pluginsPy  = "hermes_cli/plugins.py"
	configPy   = "hermes_cli/config.py"
	managedPy  = "hermes_cli/managed_scope.py"
	auxPy      = "agent/auxiliary_client.py"
	gatewayCLI = "hermes_cli/subcommands/gateway.py"
	installSh  = "scripts/install.sh"
	cliPy      = "cli.py"
	terminalPy = "tools/terminal_tool.py"
)

// need is one requirement's label and text; in gives them a kind and file.
type need struct{ label, text string }

// in is the requirements of one kind in one file, in order.
func in(kind, file string, needs ...need) []Requirement {
	out := make([]Requirement, len(needs))
	for i, n := range needs {
		out[i] = Requirement{Kind: kind, File: file, Label: n.label, Text: n.text}
	}
	return out
}

// installerNeeds is what provisioning relies on in the installer of every
// release: it has uv provision the pinned Python, and it uses the uv that
// provisioning put (verified) in HERMES_HOME/bin instead of downloading one.
func installerNeeds(rel pins.HermesRelease) []Requirement {
	return in(KindConfig, installSh,
		need{"installer Python " + rel.PythonVersion, "PYTHON_VERSION=\"" + rel.PythonVersion + "\"\n"},
		need{"installer uses the uv in HERMES_HOME/bin", "    local _managed_uv=\"$HERMES_HOME/bin/uv\"\n"})
}

// sourcePatchNeeds is what the patched "gated" mode relies on besides its
// anchors (verified on 81eaedd0 and 2bd1977d): the mode normaliser keeps any
// string (0.18.0 stopped that), and the gateway waits approvals.gateway_timeout.
var sourcePatchNeeds = in(KindConfig, approvalPy,
	need{"approvals.mode keeps \"gated\"", "        normalized = mode.strip().lower()\n        return normalized or \"manual\"\n"},
	need{"gateway wait reads approvals.gateway_timeout", "    timeout = _get_approval_config().get(\"gateway_timeout\", 300)\n"})

// smartPluginNeeds is what the smart-plugin mechanism relies on (verified on
// 3ef6bbd2, Hermes 0.19.0).
var smartPluginNeeds = slices.Concat(
	in(KindConfig, approvalPy,
		need{"approvals.mode smart is kept", "    _VALID_MODES = (\"manual\", \"smart\", \"off\")\n"},
		need{"smart approval covers one command", "            # Approve this command only. Pattern-level persistence would let one\n"},
		need{"gateway wait reads approvals.timeout", "    timeout = _get_approval_timeout()\n"}),
	in(KindSeam, approvalPy,
		need{"reviewer", "def _smart_approve(command: str, description: str) -> str:\n"},
		need{"reviewer call", "        verdict = _smart_approve(command, combined_desc_for_llm)\n"},
		need{"gateway wait", "def _await_gateway_decision(session_key: str, notify_cb, approval_data: dict,\n"},
		need{"gateway wait call, smart denial flagged",
			"                approval_data[\"smart_denied\"] = True\n            decision = _await_gateway_decision(\n" +
				"                session_key, notify_cb, approval_data, surface=\"gateway\"\n            )\n"},
		need{"CLI prompt", "def prompt_dangerous_approval(command: str, description: str,\n"},
		need{"detection variants", "def _command_detection_variants(command: str):\n"},
		need{"hardline list reads the variants", "    for command_variant in _command_detection_variants(command):\n" +
			"        variant_lower = command_variant.lower()\n        for pattern_re, description in HARDLINE_PATTERNS_COMPILED:\n"},
		need{"deny list reads the variants", "    for command_variant in _command_detection_variants(command):\n" +
			"        candidate = command_variant.lower().strip()\n"},
		need{"dangerous list reads the variants", "    for command_variant in _command_detection_variants(command):\n" +
			"        command_lower = command_variant.lower()\n        for pattern_re, description in DANGEROUS_PATTERNS_COMPILED:\n"},
		need{"CLI prompt call", "    choice = prompt_dangerous_approval(\n        command,\n        combined_desc,\n"}),
	// The interactive chat's prompt (HermesCLI._approval_callback) reads its
	// wait from CLI_CONFIG, not from prompt_dangerous_approval; the plugin
	// wraps it, from the terminal tool's callback registration, so the chat
	// waits the seed's 60 s while approvals.timeout keeps the gateway's 300.
	in(KindSeam, cliPy,
		need{"HermesCLI class", "\nclass HermesCLI("},
		need{"CLI chat prompt", "    def _approval_callback(self, command: str, description: str,\n"},
		need{"CLI registers its prompt through the terminal tool at call time",
			"def set_approval_callback(*args, **kwargs):\n    from tools.terminal_tool import set_approval_callback as _set_approval_callback\n"},
		need{"CLI agent thread registers the chat prompt",
			"                set_sudo_password_callback(self._sudo_password_callback)\n                set_approval_callback(self._approval_callback)\n"}),
	in(KindConfig, cliPy,
		need{"CLI chat wait reads approvals.timeout from CLI_CONFIG",
			"            timeout = int(CLI_CONFIG.get(\"approvals\", {}).get(\"timeout\", 60))\n"}),
	in(KindSeam, terminalPy,
		need{"terminal tool callback registration", "def set_approval_callback(cb):\n"},
		need{"terminal guard passes the thread's callback",
			"    return _check_all_guards_impl(command, env_type,\n                                  approval_callback=_get_approval_callback(),\n"}),
	in(KindHook, approvalPy,
		need{"approval hook dispatch", "def _fire_approval_hook(hook_name: str, **kwargs) -> None:\n"},
		need{"pre_approval_request at the gateway wait",
			"    _fire_approval_hook(\n        \"pre_approval_request\",\n        command=command,\n        description=description,\n"},
		need{"post_approval_response at the CLI prompt",
			"    _fire_approval_hook(\n        \"post_approval_response\",\n        command=command,\n        description=combined_desc,\n"}),
	in(KindHook, pluginsPy,
		need{"pre/post_approval_response in VALID_HOOKS", "    \"pre_approval_request\",\n    \"post_approval_response\",\n"},
		need{"register_hook", "    def register_hook(self, hook_name: str, callback: Callable) -> None:\n"},
		need{"bundled plugins in the tree's plugins/", "    return Path(__file__).resolve().parent.parent / \"plugins\"\n"},
		need{"bundled plugins are loaded", "        repo_plugins = get_bundled_plugins_dir()\n"},
		need{"plugins.enabled opt-in", "        enabled = _get_enabled_plugins()  # None = opt-in default (nothing enabled)\n"}),
	in(KindConfig, configPy,
		need{"approvals defaults", "    \"approvals\": {\n        \"mode\": \"smart\",\n        \"timeout\": 60,\n        \"cron_mode\": \"deny\",\n"},
		need{"auxiliary.approval keys", "        \"approval\": {\n            \"provider\": \"auto\",\n            \"model\": \"\","}),
	in(KindConfig, auxPy,
		need{"auxiliary task config", "def _get_auxiliary_task_config(task: str) -> Dict[str, Any]:\n"},
		need{"auxiliary.approval.reasoning_effort", "        effort = task_config.get(\"reasoning_effort\")\n"},
		need{"auxiliary.approval.timeout", "def _get_task_timeout(task: str, default: float = _DEFAULT_AUX_TIMEOUT) -> float:\n"}),
	in(KindFlag, gatewayCLI,
		need{"gateway run --external-supervisor", "        \"--external-supervisor\",\n"}),
)

// managedScopeNeeds is what pinning the gate in Hermes' managed scope
// relies on (verified on 2bd1977d and 3ef6bbd2, Hermes 0.17.0 and 0.19.0):
// the root-owned directory (the variable that could name another is an
// anchor: the gate's edit reads the tree's record instead), its keys
// winning when the config loads, and `hermes config set` refusing them.
var managedScopeNeeds = slices.Concat(
	in(KindConfig, managedPy,
		need{"managed scope in /etc/hermes", "_DEFAULT_MANAGED_DIR = Path(\"/etc/hermes\")\n"}),
	in(KindConfig, configPy,
		need{"managed keys win when the config loads", "        managed_config = managed_scope.load_managed_config()\n"},
		need{"config set refuses a managed key", "    # Managed scope guard (D2): a key pinned by the managed layer cannot be set by\n"}))

// Requirements lists everything the release's mechanism relies on: the
// anchors of its source edits first, then the rest.
func Requirements(rel pins.HermesRelease) ([]Requirement, error) {
	set, err := patch.SetByID(rel.AnchorSet)
	if err != nil {
		return nil, err
	}
	var out []Requirement
	for _, a := range set.Anchors {
		out = append(out, Requirement{Kind: KindAnchor, File: a.File, Label: a.Label, Text: a.Text()})
	}
	out = append(out, installerNeeds(rel)...)
	switch rel.Mechanism {
	case pins.GateSourcePatch:
		out = append(out, sourcePatchNeeds...)
	case pins.GateSmartPlugin:
		out = append(out, smartPluginNeeds...)
	default:
		return nil, fmt.Errorf("hermes release %s: unknown gate mechanism %q", rel.Version, rel.Mechanism)
	}
	if rel.ManagedScope {
		out = append(out, managedScopeNeeds...)
	}
	if !rel.ExternalSupervisor {
		return out, nil
	}
	for _, r := range out {
		if r.Kind == KindFlag {
			return out, nil
		}
	}
	return nil, fmt.Errorf("hermes release %s: the table says the gateway takes --external-supervisor but no requirement checks it", rel.Version)
}
