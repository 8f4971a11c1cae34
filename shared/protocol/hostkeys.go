package protocol

// HostKeys is the result of the agent's `hostkeys` verb: the guest's SSH
// host keys, read out of band so the host can pin one before it ever
// connects over the network.
type HostKeys struct {
	Keys []HostKey `json:"keys"`
}

// HostKey is one public host key.
type HostKey struct {
	// Type is the SSH key type, for example "ssh-ed25519".
	Type string `json:"type"`
	// Path is the public key's path in the guest.
	Path string `json:"path"`
	// Fingerprint is OpenSSH's SHA256:… form.
	Fingerprint string `json:"fingerprint"`
	// PublicKey is the key in authorized_keys form.
	PublicKey string `json:"publicKey"`
}
