package chunkstore

import (
	"hash/maphash"
)

// What `backups --verify` reads. Besides the structure (every tree
// chunk read and re-hashed, every file chunk held at its size), Verify
// reads and re-hashes a random sample of the file chunks, chosen afresh
// on every run, as restic's check --read-data-subset does: every chunk
// when the store holds at most verifyAllBytes of plaintext, else one in
// verifySampleRate (by a hash keyed at random per run), and never more
// than verifyBudget bytes per store and run. A chunk several backups
// share is read once per run. A chunk found corrupt is set aside
// (quarantine.go).
const (
	// verifyAllBytes: a store this small is read whole (about a second).
	verifyAllBytes = 256 << 20
	// verifySampleRate: one chunk in this many of a larger store.
	verifySampleRate = 32
	// verifyBudget bounds the bytes one run reads of one store.
	verifyBudget = 1 << 30
	// maxSampled bounds the chunks a run remembers having read (32 MiB).
	maxSampled = 1 << 20
)

// sampler chooses the chunks Verify reads in one run of one store.
type sampler struct {
	seed maphash.Seed
	all  bool  // the store is small: every chunk
	read int64 // bytes chosen so far
	done map[ID]bool
}

// verifySample is the store's sampler, made at its first Verify.
func (s *Store) verifySample() *sampler {
	if s.sample == nil {
		var total int64
		s.idx.each(func(e *entry) { total += int64(e.rlen) })
		s.sample = &sampler{seed: maphash.MakeSeed(), all: total <= verifyAllBytes, done: map[ID]bool{}}
	}
	return s.sample
}

// take reports whether chunk id, of n bytes, is read in this run; every
// chunk is with readData (within no budget).
func (p *sampler) take(id ID, n int64, readData bool) bool {
	switch {
	case p.done[id]:
		return false
	case readData:
	case !p.all && maphash.Bytes(p.seed, id[:])%verifySampleRate != 0:
		return false
	case p.read+n > verifyBudget:
		return false
	}
	p.read += n
	if len(p.done) < maxSampled {
		p.done[id] = true
	}
	return true
}
