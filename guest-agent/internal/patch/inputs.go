package patch

// The input edits: what the agent (the hermes user) can write must neither
// change the approval policy nor load code into Hermes. Hermes reads its
// .env ($HERMES_HOME/.env, the agent's) into os.environ with override, at
// gateway start and before each turn, and the environment decides the
// managed directory (HERMES_MANAGED_DIR, PYTEST_CURRENT_TEST), project
// plugins and more; it imports plugins and memory providers from
// $HERMES_HOME/plugins; and the Codex endpoint the reviewer is called at
// may come from the credential pool in $HERMES_HOME/auth.json. The anchors
// below are the same text on 0.16.0, 0.17.0 and 0.19.0 (0.16.0 has no
// managed_scope.py: its managed file is read by the reviewer module, which
// takes the same directory).

const (
	envLoaderFile  = "hermes_cli/env_loader.py"
	managedFile    = "hermes_cli/managed_scope.py"
	pluginsFile    = "hermes_cli/plugins.py"
	memoryInitFile = "plugins/memory/__init__.py"
	// ManagedPointer is the file in the (root-owned) tree naming the managed
	// directory Hermes reads, whatever its environment says; without it,
	// /etc/hermes.
	ManagedPointer = ".hermes-box-managed"
)

// inputAnchors are the input edits of one release; managedScope says the
// release has hermes_cli/managed_scope.py (0.17.0 and later).
func inputAnchors(managedScope bool) []Anchor {
	out := []Anchor{
		anchor(envLoaderFile, ".env keeps policy and code-loading variables (before)", "",
			"    loaded: list[Path] = []\n", "gate-env-keep"),
		anchor(envLoaderFile, ".env keeps policy and code-loading variables (after)", "",
			"    return loaded\n", "gate-env-restore"),
		anchor(pluginsFile, "no plugins from HERMES_HOME",
			"        user_manifests = self._scan_directory(user_dir, source=\"user\")\n", "", "gate-no-user-plugins"),
		anchor(pluginsFile, "no project plugins",
			"            project_manifests = self._scan_directory(project_dir, source=\"project\")\n", "", "gate-no-project-plugins"),
		anchor(memoryInitFile, "no memory provider from HERMES_HOME",
			"        d = get_hermes_home() / \"plugins\"\n", "", "gate-no-user-memory"),
		anchor(auxClientFile, "the reviewer's Codex endpoint is Codex's",
			"            base_url = _pool_runtime_base_url(entry, _CODEX_AUX_BASE_URL) or _CODEX_AUX_BASE_URL\n", "", "gate-codex-endpoint"),
	}
	if managedScope {
		out = append(out, anchor(managedFile, "managed directory is root's", "",
			"    override = os.environ.get(\"HERMES_MANAGED_DIR\", \"\").strip()\n", "gate-managed-dir"))
	}
	return out
}
