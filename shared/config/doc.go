// Package config loads hermes-box settings from built-in defaults, the
// project's hermes-box.conf and the environment, in that order of precedence,
// and reads the secret-env.txt mappings that hand host secrets to the guest.
//
// hermes-box.conf looks like a shell file of KEY=VALUE assignments but is never
// given to a shell: Parse only reads assignments, so command substitutions and
// other shell syntax are either kept as literal text or rejected with the file
// and line. Every problem with the configuration itself is an *Error, which
// matches ErrInvalid through errors.Is.
package config
