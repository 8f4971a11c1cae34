// Package gate is Hermes Box's one approval gate over every supported
// Hermes release, with a mechanism per release from shared/pins:
//
//   - source-patch (0.16.0, 0.17.0): approvals.mode "gated" added at exact
//     anchors, with the reviewer module (guest-agent/internal/patch);
//   - smart-plugin (0.19.0): Hermes' own smart approvals configured to the
//     seed's meaning, the hermes-box-gate plugin on Hermes' approval hooks
//     (embedded here: verdict floors, the reason shown to the human, denials
//     final, the hash-chained audit record), and the source edits for
//     what neither reaches (the reviewer call's Codex service tier, no
//     yolo, container-backend or headless-run shortcut past the approvals).
//
// Check is the check verb: it reads the tree's version, refuses releases
// the table refuses (0.18.x) or does not know, and counts every anchor, hook,
// seam, config key and flag the release's mechanism relies on; each must
// occur exactly once. Probe asks the installed Hermes itself, with its own
// interpreter, how it resolves the approval settings, started as the
// gateway starts (its working directory, environment and .env); Verify
// compares that with what the mechanism needs. Inputs classifies every
// input the gateway's and the agent's start-up and approval code read
// (inventory_test.go lists them from the real trees).
package gate
