package gate

import (
	"slices"
	"strings"
)

// InputClass is how the gate answers one input Hermes reads.
type InputClass string

// The classes of Inputs.
const (
	// Pinned: the managed scope pins it (Input.Pin names the key), or a
	// source edit of the gate fixes it.
	Pinned InputClass = "pinned"
	// Stripped: what the agent writes cannot set it: the gate's .env edit
	// restores the variable (gate-env-keep), or its edits drop the
	// directory (gate-no-user-plugins, gate-no-project-plugins,
	// gate-no-user-memory).
	Stripped InputClass = "stripped"
	// Benign: neither the approval policy nor code loaded into Hermes.
	Benign InputClass = "benign"
	// RootOwned: a path in root's Hermes tree or venv.
	RootOwned InputClass = "root-owned path"
)

// Input is one row of Inputs: a kind ("env", "config", "import"), a name
// (exact, or a prefix ending in "*"), its class and why.
type Input struct {
	Kind, Name string
	Class      InputClass
	// Pin is the managed key that pins a Pinned config input ("" for one a
	// source edit fixes).
	Pin string
	Why string
}

// InventoryFiles are the files of Hermes' gateway and agent start-up and
// approval code whose inputs Inputs classifies (inventory_test.go lists
// them from the real trees): the gateway, .env loading, the managed scope,
// the config loader, the plugin manager, the approval code and its
// reviewer's client, the agent's initialisation, the memory and context
// engine loaders, and the workspace snapshot (GitSpawn).
var InventoryFiles = []string{
	"gateway/run.py", "hermes_cli/env_loader.py", "hermes_cli/managed_scope.py", "hermes_cli/config.py",
	"hermes_cli/plugins.py", "tools/approval.py", "agent/agent_init.py", "agent/auxiliary_client.py",
	"plugins/memory/__init__.py", "plugins/context_engine/__init__.py", "agent/coding_context.py",
}

// Inputs classifies every input InventoryFiles read on the supported
// releases (0.16.0, 0.17.0, 0.19.0). A release that reads a new one fails
// inventory_test.go until it has a row here.
var Inputs = slices.Concat(envInputs, configInputs, importInputs)

const (
	whyEnvKeep  = "restored after every .env load (gate-env-keep)"
	whyApproval = "decides the approval context or policy; " + whyEnvKeep
	whyCode     = "decides which code Hermes or its commands load; " + whyEnvKeep
)

var envInputs = []Input{
	{"env", "HERMES_MANAGED_DIR", Stripped, "", "names the managed directory; " + whyEnvKeep + ", and the managed-dir edit reads the tree's record instead"},
	{"env", "PYTEST_CURRENT_TEST", Stripped, "", "makes the managed scope ignore /etc/hermes; " + whyEnvKeep + ", and the managed-dir edit ignores it"},
	{"env", "HERMES_MANAGED", Stripped, "", "the package manager's write lock; " + whyEnvKeep},
	{"env", "HERMES_ENABLE_PROJECT_PLUGINS", Stripped, "", "loads ./.hermes/plugins; " + whyEnvKeep + ", and gate-no-project-plugins drops them"},
	{"env", "HERMES_BUNDLED_PLUGINS", Stripped, "", "names the bundled plugins' directory; " + whyCode},
	{"env", "HERMES_SAFE_MODE", Stripped, "", "switches plugin loading; " + whyCode},
	{"env", "HERMES_DEV", Stripped, "", "development switches of the config loader; " + whyEnvKeep},
	{"env", "HERMES_HOME", Stripped, "", "where config, .env and plugins are read; " + whyEnvKeep},
	{"env", "HOME", Stripped, "", "the home Hermes and git read; " + whyEnvKeep},
	{"env", "VIRTUAL_ENV", Stripped, "", "the venv Python imports from; " + whyCode},
	{"env", "PYTHON*", Stripped, "", "PYTHONPATH and the interpreter's switches; " + whyCode},
	{"env", "TERMINAL_*", Stripped, "", "the terminal backend (container backends skip approvals) and its cwd; " + whyApproval},
	{"env", "HERMES_YOLO_MODE", Stripped, "", "approves everything; " + whyApproval + ", and gate-no-yolo ignores it"},
	{"env", "HERMES_INTERACTIVE", Stripped, "", "tells an interactive CLI run; " + whyApproval},
	{"env", "HERMES_EXEC_ASK", Stripped, "", "tells ask mode; " + whyApproval},
	{"env", "HERMES_GATEWAY_SESSION", Stripped, "", "tells a gateway run; " + whyApproval},
	{"env", "HERMES_CRON_SESSION", Stripped, "", "tells a cron run (cron_mode); " + whyApproval},
	{"env", "HERMES_SESSION_*", Stripped, "", "the session the approval belongs to; " + whyApproval},
	{"env", "HERMES_REDACT_SECRETS", Stripped, "", "security.redact_secrets' variable; " + whyEnvKeep},
	{"env", "SSL_CERT_FILE", Stripped, "", "the CAs the reviewer's TLS trusts; " + whyEnvKeep},
	{"env", "HERMES_SPINNER_PAUSE", Benign, "", "display"},
	{"env", "SUDO_PASSWORD", Benign, "", "a credential the owner sets; sudo is not the hermes user's"},
	{"env", "HERMES_GATEWAY_*", Benign, "", "gateway timeouts and busy-message modes"},
	{"env", "GATEWAY_PROXY_*", Benign, "", "the gateway's relay for messaging platforms, not the reviewer's endpoint"},
	{"env", "GATEWAY_ALLOW_ALL_USERS", Benign, "", "who may message the gateway: the owner's platform setting (Hermes' setup keeps it in .env)"},
	{"env", "HERMES_AUTO_CONTINUE_FRESHNESS", Benign, "", "gateway behaviour"},
	{"env", "HERMES_BACKGROUND_NOTIFICATIONS", Benign, "", "notifications"},
	{"env", "HERMES_TELEGRAM_*", Benign, "", "notifications"},
	{"env", "HERMES_TOOL_PROGRESS_MODE", Benign, "", "display"},
	{"env", "HERMES_EPHEMERAL_SYSTEM_PROMPT", Benign, "", "the agent's prompt, not the reviewer's"},
	{"env", "HERMES_PREFILL_MESSAGES_FILE", Benign, "", "the agent's prompt, not the reviewer's"},
	{"env", "HERMES_MAX_*", Benign, "", "budgets"},
	{"env", "HERMES_RESTART_DRAIN_TIMEOUT", Benign, "", "restart timing"},
	{"env", "INVOCATION_ID", Benign, "", "systemd detection"},
	{"env", "MESSAGING_CWD", Benign, "", "the directory sessions work in"},
	{"env", "HERMES_UID", Benign, "", "ownership of HERMES_HOME's files"},
	{"env", "HERMES_GID", Benign, "", "ownership of HERMES_HOME's files"},
	{"env", "HERMES_HOME_MODE", Benign, "", "mode of HERMES_HOME's files"},
	{"env", "HERMES_SKIP_CHMOD", Benign, "", "mode of HERMES_HOME's files"},
	{"env", "HERMES_CONTAINER", Benign, "", "container detection for paths"},
	{"env", "HERMES_TIMEZONE", Benign, "", "time zone"},
	{"env", "EDITOR", Benign, "", "`hermes config edit`, run by a person"},
	{"env", "VISUAL", Benign, "", "`hermes config edit`, run by a person"},
	{"env", "OP_SERVICE_ACCOUNT_TOKEN", Benign, "", "a credential"},
	{"env", "HERMES_PLUGINS_DEBUG", Benign, "", "logging"},
	{"env", "HERMES_NOUS_*", Benign, "", "another provider than the reviewer's (openai-codex, pinned)"},
	{"env", "HERMES_OPENROUTER_*", Benign, "", "another provider than the reviewer's (openai-codex, pinned)"},
	{"env", "HERMES_XAI_BASE_URL", Benign, "", "another provider than the reviewer's (openai-codex, pinned)"},
	{"env", "XAI_BASE_URL", Benign, "", "another provider than the reviewer's (openai-codex, pinned)"},
	{"env", "NOUS_INFERENCE_BASE_URL", Benign, "", "another provider than the reviewer's (openai-codex, pinned)"},
	{"env", "OPENAI_*", Benign, "", "the custom provider; the reviewer's openai-codex endpoint is Codex's (gate-codex-endpoint: not even the credential pool moves it)"},
	{"env", "OPENROUTER_API_KEY", Benign, "", "a credential of another provider"},
	{"env", "<dynamic>@_env_enabled", Benign, "", "hermes_cli.plugins' helper: its callers' names are rows here"},
	{"env", "<dynamic>@_env_ref_snapshot", Benign, "", "${VAR} references in the config: values, not policy (the managed scope's leaves win)"},
	{"env", "<dynamic>@_expand_env_vars", Benign, "", "${VAR} references in the config: values, not policy (the managed scope's leaves win)"},
	{"env", "<dynamic>@_load_config_impl", Benign, "", "${VAR} references in the config: values, not policy (the managed scope's leaves win)"},
	{"env", "<dynamic>@get_env_value*", Benign, "", "`hermes config` reading a credential"},
	{"env", "<dynamic>@reload_env", Benign, "", "`hermes config` reading .env back"},
	{"env", "<dynamic>@remove_env_value", Benign, "", "`hermes config` editing .env"},
	{"env", "<dynamic>@_fallback_entry_api_key", Benign, "", "a provider's key variable"},
	{"env", "<dynamic>@resolve_provider_client", Benign, "", "a provider's key variable"},
	{"env", "<dynamic>@_resolve_task_provider_model", Benign, "", "AUXILIARY_<TASK>_*: stripped (AUXILIARY_ prefix, gate-env-keep); the bridge from config sets them"},
	{"env", "<dynamic>@_validate_proxy_env_urls", Benign, "", "proxy variables checked for syntax"},
	{"env", "<dynamic>@_float_env", Benign, "", "gateway timeouts (its callers' names)"},
	{"env", "<dynamic>@_handle_message_with_agent", Benign, "", "a provider's key variable"},
	{"env", "<dynamic>@_own_policy_open_startup_violation", Benign, "", "platform allow-lists (who may message the gateway)"},
	{"env", "<dynamic>@_try_resolve_fallback_provider", Benign, "", "a fallback model provider's key variable"},
	{"env", "<dynamic>@init_agent", Benign, "", "a fallback model provider's key variable"},
	{"env", "<dynamic>@start", Benign, "", "platform allow-lists and the variables a plugin declares"},
}

// approvalPin is the managed key that pins a bare approvals key read
// through tools.approval's _get_approval_config.
func approvalPin(key string) Input {
	return Input{"config", key, Pinned, "approvals." + key, "tools.approval reads approvals." + key + " (managed)"}
}

var configInputs = []Input{
	{"config", "approvals", Pinned, "approvals.mode", "its gate keys are pinned (ManagedSettingsFor)"},
	{"config", "approvals.mode", Pinned, "approvals.mode", ""},
	{"config", "approvals.cron_mode", Pinned, "approvals.cron_mode", ""},
	approvalPin("mode"), approvalPin("timeout"), approvalPin("gateway_timeout"), approvalPin("deny"),
	{"config", "command_allowlist", Pinned, "command_allowlist", "pinned empty"},
	{"config", "auxiliary.approval", Pinned, "auxiliary.approval.model", "the reviewer (0.19.0), pinned"},
	{"config", "memory.provider", Pinned, "memory.provider", "selects code imported into every agent: pinned empty"},
	{"config", "context.engine", Pinned, "context.engine", "selects code: pinned to the bundled compressor"},
	{"config", "plugins", Pinned, "plugins.enabled", "plugins.enabled and plugins.disabled are pinned"},
	{"config", "plugins.enabled", Pinned, "plugins.enabled", ""},
	{"config", "plugins.disabled", Pinned, "plugins.disabled", "pinned empty: the gate plugin cannot be disabled"},
	{"config", "plugins.entries", Benign, "", "settings of plugins that load (root's only)"},
	{"config", "security.redact_secrets", Pinned, "security.redact_secrets", ""},
	{"config", "security.tirith_enabled", Pinned, "security.tirith_enabled", ""},
	{"config", "terminal.backend", Pinned, "terminal.backend", "container backends skip approvals: pinned local"},
	{"config", "security", Benign, "", "its switches are rows of their own"},
	{"config", "terminal*", Benign, "", "cwd, timeouts, container images (the backend is pinned local)"},
	{"config", "memory*", Benign, "", "Hermes' own memory's sizes and switches"},
	{"config", "context", Benign, "", "its engine is a row of its own"},
	{"config", "auxiliary*", Benign, "", "models of other auxiliary tasks (compression, vision, ...)"},
	{"config", "mcp_servers", Benign, "", "MCP servers run as their own processes (as hermes), outside Hermes' process and its approvals' code"},
	{"config", "quick_commands", Benign, "", "commands a person types in the chat"},
	{"config", "bitwarden*", Benign, "", "a secret source"},
	{"config", "model*", Benign, "", "the agent's model"},
	{"config", "provider*", Benign, "", "the agent's model provider"},
	{"config", "custom_providers", Benign, "", "the agent's model provider"},
	{"config", "fallback_*", Benign, "", "the agent's fallback model"},
	{"config", "base_url", Benign, "", "a model endpoint (the reviewer's openai-codex endpoint is a constant)"},
	{"config", "api_*", Benign, "", "a model endpoint's key or mode"},
	{"config", "key_env", Benign, "", "a model endpoint's key variable"},
	{"config", "extra_body", Benign, "", "a model call's extra body (the reviewer's is pinned)"},
	{"config", "reasoning_effort", Benign, "", "a model call's effort (the reviewer's is pinned)"},
	{"config", "effort", Benign, "", "a model call's effort (the reviewer's is pinned)"},
	{"config", "max_tokens", Benign, "", "a budget"},
	{"config", "context_length", Benign, "", "a budget"},
	{"config", "cache_ttl", Benign, "", "prompt caching"},
	{"config", "default", Benign, "", "the default model"},
	{"config", "enabled", Benign, "", "switches of compression, timestamps, snapshots"},
	{"config", "moa", Benign, "", "mixture of agents (models)"},
	{"config", "openrouter*", Benign, "", "another provider's settings"},
	{"config", "agent*", Benign, "", "the agent's budgets, prompts, toolsets and retries"},
	{"config", "display*", Benign, "", "display"},
	{"config", "gateway*", Benign, "", "gateway behaviour (media, timestamps, proxy, runtime)"},
	{"config", "sessions*", Benign, "", "session retention"},
	{"config", "checkpoints*", Benign, "", "checkpoint retention"},
	{"config", "compression*", Benign, "", "context compression settings"},
	{"config", "delegation*", Benign, "", "sub-agents' concurrency"},
	{"config", "curator", Benign, "", "skill curation"},
	{"config", "skills*", Benign, "", "skills' nudges"},
	{"config", "goals*", Benign, "", "goal budgets"},
	{"config", "voice*", Benign, "", "voice"},
	{"config", "stt", Benign, "", "speech to text"},
	{"config", "timezone", Benign, "", "time zone"},
	{"config", "privacy*", Benign, "", "PII redaction in prompts"},
	{"config", "network*", Benign, "", "IPv4 preference"},
	{"config", "approvals.destructive_slash_confirm", Benign, "", "a confirmation of slash commands a person types, not of the agent's commands"},
	{"config", "platform_*", Benign, "", "platform toolsets and hints"},
	{"config", "prefill_messages_file", Benign, "", "the agent's prompt"},
	{"config", "hygiene_hard_message_limit", Benign, "", "a budget"},
	{"config", "max_turns", Benign, "", "a budget"},
	{"config", "tool_loop_guardrails", Benign, "", "a budget"},
	{"config", "write_json_snapshots", Benign, "", "logging"},
	{"config", "model_catalog*", Benign, "", "the model list's cache"},
	{"config", "_config_version", Benign, "", "the config's schema version"},
	{"config", "timeout", Benign, "", "a model call's timeout (the reviewer's is pinned)"},
	{"config", "fallback_chain", Benign, "", "an auxiliary task's fallback models"},
}

var importInputs = []Input{
	{"import", "insert(str(Path(__file__).parent.parent))@<module>", RootOwned, "", "the Hermes tree"},
	{"import", "insert(project_entry)@_ensure_windows_gateway_venv_imports", RootOwned, "", "Windows only: the tree's venv"},
	{"import", "insert(site_entry)@_ensure_windows_gateway_venv_imports", RootOwned, "", "Windows only: the tree's venv"},
	{"import", "_scan_directory(repo_plugins)@_discover_and_load_inner", RootOwned, "", "the tree's plugins/ (HERMES_BUNDLED_PLUGINS stripped)"},
	{"import", "_scan_directory(repo_plugins / 'platforms')@_discover_and_load_inner", RootOwned, "", "the tree's plugins/platforms"},
	{"import", "_scan_directory(user_dir)@_discover_and_load_inner", Stripped, "", "$HERMES_HOME/plugins: dropped (gate-no-user-plugins)"},
	{"import", "_scan_directory(project_dir)@_discover_and_load_inner", Stripped, "", "./.hermes/plugins: dropped (gate-no-project-plugins)"},
	{"import", "_scan_directory_level(*", RootOwned, "", "the levels of the directories above"},
	{"import", "spec_from_file_location(init_file)@_load_directory_module", RootOwned, "", "a plugin the scans above found"},
	{"import", "spec_from_file_location(str(init_file))@_load_engine_from_dir", RootOwned, "", "the tree's plugins/context_engine"},
	{"import", "spec_from_file_location(str(parent_init))@_load_engine_from_dir", RootOwned, "", "the tree's plugins/context_engine"},
	{"import", "spec_from_file_location(str(sub_file))@_load_engine_from_dir", RootOwned, "", "the tree's plugins/context_engine"},
	{"import", "spec_from_file_location(str(init_file))@_load_provider_from_dir", RootOwned, "", "a memory provider: the tree's plugins/memory only (gate-no-user-memory drops $HERMES_HOME/plugins)"},
	{"import", "spec_from_file_location(str(parent_init))@_load_provider_from_dir", RootOwned, "", "as above"},
	{"import", "spec_from_file_location(str(sub_file))@_load_provider_from_dir", RootOwned, "", "as above"},
	{"import", "spec_from_file_location(str(cli_file))@discover_plugin_cli_commands", RootOwned, "", "the active memory provider's CLI (the tree's only)"},
	{"import", "_register_synthetic_package(*", Stripped, "", "the namespace of user memory providers, which gate-no-user-memory leaves empty"},
}

// classify returns the row of table for an input: an exact name first,
// else the longest prefix row.
func classify(table []Input, kind, name string) (Input, bool) {
	var best Input
	found := false
	for _, in := range table {
		if in.Kind != kind {
			continue
		}
		if in.Name == name {
			return in, true
		}
		if p, ok := strings.CutSuffix(in.Name, "*"); ok && strings.HasPrefix(name, p) && (!found || len(p) > len(best.Name)-1) {
			best, found = in, true
		}
	}
	return best, found
}
