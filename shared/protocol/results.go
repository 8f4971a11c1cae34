package protocol

import "github.com/hermes-box/hermes-box/shared/health"

// The results of the agent verbs the host decodes, each with a golden file
// in testdata/results. The agent encodes these types or, where its own
// type carries more behaviour, a type its tests hold field for field to
// these.

// ServicesStatus is the result of `services … --json`: the supervised
// services in priority order.
type ServicesStatus struct {
	Services []ServiceStatus `json:"services"`
}

// ServiceStatus is one supervised service: its health state and its
// description.
type ServiceStatus struct {
	health.Service
	Description string `json:"description"`
}

// ExecutorStatus is the result of `executor status`: the active release,
// every release the store holds, and with --sizes the disk use of the
// runtime and data directories.
type ExecutorStatus struct {
	Current      *ExecutorRelease  `json:"current"`
	Releases     []ExecutorRelease `json:"releases"`
	RuntimeBytes *int64            `json:"runtimeBytes,omitempty"`
	DataBytes    *int64            `json:"dataBytes,omitempty"`
}

// ExecutorRelease is one extracted, validated Executor image.
type ExecutorRelease struct {
	// Name is the manifest digest's hex, the directory name.
	Name string `json:"name"`
	// Dir is the release directory.
	Dir              string `json:"dir"`
	ImageReference   string `json:"imageReference"`
	RepositoryDigest string `json:"repositoryDigest"`
	ManifestDigest   string `json:"manifestDigest"`
	// Layout is how the image arranges its runtime ("workspace",
	// "packaged"); empty when it holds neither.
	Layout string `json:"layout,omitempty"`
}

// SecretsStored is the result of `secrets set`: the names of the variables
// the agent stored (never a value), whether they are on tmpfs, and whether
// it restarted the Hermes gateway with them.
type SecretsStored struct {
	Names            []string `json:"names"`
	Tmpfs            bool     `json:"tmpfs"`
	GatewayRestarted bool     `json:"gatewayRestarted"`
}
