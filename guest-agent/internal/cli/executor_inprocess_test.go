package cli

import "github.com/hermes-box/hermes-box/guest-agent/internal/ociverb"

// The tests run the executor verb in-process, as the helper does.
func init() { ExecutorInProcess = ociverb.Run }
