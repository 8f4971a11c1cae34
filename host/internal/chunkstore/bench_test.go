package chunkstore

import (
	"crypto/sha256"
	"encoding/binary"
	"os"
	"runtime"
	"testing"
)

// BenchmarkIndexMillion opens a store that holds a million chunks and
// reports the memory its index keeps (index-MiB) and what loading it
// allocated in all (load-alloc-MiB, a bound on the peak), then times a
// lookup (ns/op). GC's marks add one bit per chunk. The goal is a host that stays under 128 MiB.
func BenchmarkIndexMillion(b *testing.B) {
	const n = 1_000_000
	dir := b.TempDir()
	s := openStore(b, dir)
	g := packGroup{pack: Sum([]byte("pack"))}
	for i := range n {
		var ctr [8]byte
		binary.BigEndian.PutUint64(ctr[:], uint64(i))
		id := ID(sha256.Sum256(ctr[:]))
		g.entries = append(g.entries, packEntry{id: id, off: uint32(i), slen: 100, rlen: 200, zstd: true})
	}
	if _, err := s.writeIndex([]packGroup{g}); err != nil {
		b.Fatal(err)
	}
	must(b, os.WriteFile(s.packPath(g.pack), nil, 0o400))
	g = packGroup{}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	big := openStore(b, dir)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if big.Len() != n {
		b.Fatalf("%d chunks held, want %d", big.Len(), n)
	}
	i := 0
	for b.Loop() {
		if !big.Has(big.idx.entries[i%n].id) {
			b.Fatal("a held chunk is missing")
		}
		i++
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "index-MiB")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), "load-alloc-MiB")
}

// BenchmarkWrite stores 64 MiB of half-compressible 256 KiB chunks
// (MB/s of plaintext).
func BenchmarkWrite(b *testing.B) {
	chunks := set("bench", 256, 256<<10)
	b.SetBytes(int64(len(chunks) * 256 << 10))
	for b.Loop() {
		s, err := Open(b.TempDir())
		must(b, err)
		put(b, s, chunks)
		s.Close()
	}
}
