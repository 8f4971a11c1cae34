package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

// examples are the Examples section of every command's help, keyed by the
// command's path below the root ("" is the root). A test checks that every
// command has one.
var examples = map[string]string{
	"": `hermes-box init                 # build the base image and create the box
hermes-box ssh                  # log in (tmux session "main")
hermes-box status               # one line per box; exit status 0 only when healthy
hermes-box snapshot first-day   # back it up
hermes-box help exit-codes      # what the exit statuses mean`,
	"version": "hermes-box version\nhermes-box version --json | jq -r .smolvm",
	"doctor": `hermes-box doctor                     # qualify the installed smolvm with a throwaway machine
hermes-box doctor --json | jq -r '.rows[] | select(.verdict != "pass") | .name'`,
	"completion": "hermes-box completion bash > /etc/bash_completion.d/hermes-box\nhermes-box completion zsh > \"${fpath[1]}/_hermes-box\"",
	"init": `hermes-box init
hermes-box init --document notes.md --document plan.pdf   # copied into /workspace/work
hermes-box init --keep-builder                            # keep a failed builder for inspection`,
	"start":   "hermes-box start",
	"stop":    "hermes-box stop",
	"restart": "hermes-box restart",
	"status": `hermes-box status
hermes-box status --json | jq -r .state   # healthy, degraded, unhealthy, stopped or missing
hermes-box status >/dev/null || echo "not healthy (exit $?)"`,
	"ssh": `hermes-box ssh                        # tmux session "main"
hermes-box ssh -- uptime              # run one command; its exit status is passed on
hermes-box ssh -- sudo hermes-box-agent services status`,
	"shell": "hermes-box shell                      # root console, no SSH or network needed",
	"logs": `hermes-box logs                       # the Hermes gateway's last lines
hermes-box logs -f sshd               # follow sshd's log; Ctrl-C ends it
hermes-box logs -n 500 hermes`,
	"destroy":  "hermes-box destroy --yes              # keeps keys, images and backups (--force is the same)",
	"audit":    "hermes-box audit\nhermes-box audit --verify\nhermes-box audit --json | jq .",
	"snapshot": "hermes-box snapshot\nhermes-box snapshot before-upgrade",
	"backups": `hermes-box backups
hermes-box backups --json | jq -r '.[] | select(.verified != "invalid") | .path'
hermes-box backups --verify          # read every checksum
hermes-box backups --read-data       # also re-hash every chunk of the incremental backups
hermes-box backups delete hermes-box-20260102-030405-manual
hermes-box backups export latest     # one file to keep elsewhere`,
	"backups prune": `hermes-box backups prune --keep-last 3 --keep-daily 7 --keep-weekly 4 --dry-run
hermes-box backups prune --keep-daily 7 --keep-weekly 4`,
	"backups repair": "hermes-box backups repair            # after the chunk store's index was lost",
	"backups export": `hermes-box backups export latest      # the newest backup, as one self-contained file
cp backups/hermes-box-export-hermes-box-20260102-030405-manual.tar* /mnt/usb/
hermes-box restore /mnt/usb/hermes-box-export-hermes-box-20260102-030405-manual.tar   # here or on another host`,
	"backups delete": `hermes-box backups delete hermes-box-20260102-030405-manual
hermes-box backups delete --force hermes-box-20260102-030405-manual   # even the last good one`,
	"restore": `hermes-box restore hermes-box-20260102-030405-manual     # a name hermes-box backups prints
hermes-box restore latest
hermes-box restore /mnt/usb/hermes-box-export-hermes-box-20260102-030405-manual.tar   # a copy backups export wrote
hermes-box restore before-upgrade --workspace-only   # after destroy and init with a new Hermes: the workspace alone`,
	"package": `hermes-box package                    # snapshot now, then package it
hermes-box package --snapshot hermes-box-20260102-030405-manual move`,
	"executor":                "hermes-box executor status\nhermes-box executor open",
	"executor open":           "hermes-box executor open",
	"executor status":         "hermes-box executor status\nhermes-box executor status --json",
	"executor logs":           "hermes-box executor logs\nhermes-box executor logs -f",
	"executor auth":           "hermes-box executor auth set\nhermes-box executor auth status --json",
	"executor auth set":       "hermes-box executor auth set                 # prompts\nprintf %s \"$KEY\" | hermes-box executor auth set",
	"executor auth status":    "hermes-box executor auth status\nhermes-box executor auth status --json",
	"executor auth clear":     "hermes-box executor auth clear",
	"executor connections":    "hermes-box executor connections",
	"executor tools":          "hermes-box executor tools\nhermes-box executor tools github",
	"executor mcp-test":       "hermes-box executor mcp-test",
	"executor connect-hermes": "hermes-box executor connect-hermes",
	"exit-codes":              "hermes-box help exit-codes",
	"hostkey":                 "hermes-box hostkey repin",
	"hostkey repin":           "hermes-box hostkey repin          # asks before pinning\nhermes-box hostkey repin --yes    # off a terminal",
}

// applyExamples sets the Examples of cmd and of every command below it,
// indented as cobra prints them.
func applyExamples(cmd *cobra.Command) {
	if ex, ok := examples[commandKey(cmd)]; ok && cmd.Example == "" {
		cmd.Example = "  " + strings.ReplaceAll(ex, "\n", "\n  ")
	}
	for _, c := range cmd.Commands() {
		applyExamples(c)
	}
}

// commandKey is cmd's path without the root's name.
func commandKey(cmd *cobra.Command) string {
	path := strings.Fields(cmd.CommandPath())
	return strings.Join(path[1:], " ")
}
