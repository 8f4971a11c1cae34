// Package oci turns the pinned Executor image into a runnable release inside
// the box: it pulls the image by digest with containers/image into a blob
// cache that survives failed attempts, checks the platform and every blob
// digest itself, refuses unsafe layer entries before they are unpacked,
// keeps only the paths Executor needs, and switches a relative `current`
// symlink atomically once the release has been validated.
//
// Runtime layout under the runtime root (default
// /workspace/.hermes-box-runtime/executor):
//
//	launcher.lock                    flock held while pulling or activating
//	.oci-cache-<source digest hex>/  OCI layout; completed blobs are reused
//	releases/<manifest digest hex>/  app/…, usr/local/bin/bun, metadata files
//	current -> releases/<hex>        relative symlink, swapped by rename
//
// The pre-check and the unpack live in package tarfs.
//
// Temporaries (.pull-config-*, .validation-*, .current-*, releases/.staging-*,
// releases/.obsolete-*, oci-put-blob* in a cache) are reaped under the lock.
package oci
