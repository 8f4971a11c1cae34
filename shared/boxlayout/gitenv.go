package boxlayout

import "strconv"

// gatewayGitConfig is the git configuration the Hermes gateway runs with
// (and every command it starts inherits), as environment entries, which
// git ranks above every config file, the repository's own .git/config
// included: a repository the agent cloned or wrote cannot have git run a
// program of its choosing when Hermes looks at it (GitSpawn,
// CVE-2026-71963: Hermes 0.19.0 runs `git status` in the session's
// directory before any approval, and core.fsmonitor there names a
// program). The gate's .env edit keeps .env from changing any GIT_
// variable. Filter drivers (filter.<name>.clean, named by the
// repository's .gitattributes) have no fixed key and are not covered.
var gatewayGitConfig = [][2]string{
	{"core.fsmonitor", "false"},        // the fsmonitor hook `git status` runs
	{"core.hooksPath", "/dev/null"},    // hooks (commit, checkout, merge, ...)
	{"core.pager", "cat"},              // a pager program
	{"core.sshCommand", "ssh"},         // the program a fetch or clone runs
	{"credential.helper", ""},          // credential helpers (empty resets the list)
	{"protocol.ext.allow", "never"},    // ext:: remotes, which run a command
	{"core.alternateRefsCommand", ""},  // a command run for alternates' refs
	{"uploadpack.packObjectsHook", ""}, // a hook of local clones and fetches
}

// GatewayGitEnv is the environment that pins the gateway's git
// configuration: GIT_CONFIG_COUNT and its GIT_CONFIG_KEY_n /
// GIT_CONFIG_VALUE_n entries (git 2.31 and later).
func GatewayGitEnv() []string {
	out := []string{"GIT_CONFIG_COUNT=" + strconv.Itoa(len(gatewayGitConfig))}
	for i, kv := range gatewayGitConfig {
		n := strconv.Itoa(i)
		out = append(out, "GIT_CONFIG_KEY_"+n+"="+kv[0], "GIT_CONFIG_VALUE_"+n+"="+kv[1])
	}
	return out
}

// GatewayPath is the Hermes gateway's PATH.
const GatewayPath = "/usr/local/bin:/usr/bin:/bin"
