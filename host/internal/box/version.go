package box

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/hermes-box/hermes-box/shared/buildinfo"
	"github.com/hermes-box/hermes-box/shared/pins"
	"github.com/hermes-box/hermes-box/shared/protocol"
)

// Version is what `hermes-box version --json` prints.
type Version struct {
	Version  string `json:"version"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	Protocol int    `json:"protocol"`
	// Smolvm is the release to install (`jq -r .smolvm` prints it);
	// SmolvmSupported every release of the table.
	Smolvm          string   `json:"smolvm"`
	SmolvmSupported []string `json:"smolvmSupported"`
	Hermes          string   `json:"hermes"`
}

// CurrentVersion is this binary's version, platform, protocol and pins.
func CurrentVersion() Version {
	return Version{Version: buildinfo.Version, OS: runtime.GOOS, Arch: runtime.GOARCH, Protocol: protocol.Version,
		Smolvm: pins.SmolvmRecommended, SmolvmSupported: strings.Split(pins.SmolvmTableVersions(), ","), Hermes: pins.DefaultHermesCommit}
}

// VersionLine is the one-line version (`version`, `--version`).
func VersionLine() string {
	v := CurrentVersion()
	return fmt.Sprintf("hermes-box %s %s/%s protocol %d smolvm %s hermes %s", v.Version, v.OS, v.Arch, v.Protocol, strings.Join(v.SmolvmSupported, ","), v.Hermes)
}
