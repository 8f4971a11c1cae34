// Package ordered runs a step on several goroutines over items handed
// over one at a time, and finishes each item on one goroutine in the
// order it was handed over. A fixed set of reusable slots bounds what is
// in flight, and so the memory.
package ordered

import (
	"sync"
	"sync/atomic"
)

// Slot carries one item through a Pipeline; V is the caller's.
type Slot[T any] struct {
	V     T
	ready chan struct{}
}

// Pipeline is a running pipeline. Take, Put and Close are for one
// goroutine, the one handing the items over.
type Pipeline[T any] struct {
	free    chan *Slot[T]
	work    chan *Slot[T]
	order   chan *Slot[T]
	workers sync.WaitGroup
	done    chan error
	failed  atomic.Pointer[error]
	closed  bool
}

// New starts workers goroutines running work and one running finish,
// over slots slots (at least workers, for them all to be busy).
func New[T any](workers, slots int, work func(*T), finish func(*T) error) *Pipeline[T] {
	p := &Pipeline[T]{free: make(chan *Slot[T], slots), work: make(chan *Slot[T], slots),
		order: make(chan *Slot[T], slots), done: make(chan error, 1)}
	for range slots {
		p.free <- &Slot[T]{ready: make(chan struct{}, 1)}
	}
	p.workers.Add(workers)
	for range workers {
		go func() {
			defer p.workers.Done()
			for s := range p.work {
				work(&s.V)
				s.ready <- struct{}{}
			}
		}()
	}
	go p.finish(finish)
	return p
}

// Take returns a free slot to fill, waiting for one; once finish has
// failed, its error.
func (p *Pipeline[T]) Take() (*Slot[T], error) {
	if err := p.failed.Load(); err != nil {
		return nil, *err
	}
	return <-p.free, nil
}

// Put hands s over: work runs on it first when withWork, and finish once
// every slot put before it is finished.
func (p *Pipeline[T]) Put(s *Slot[T], withWork bool) {
	p.order <- s // never blocks: no channel holds more than the slots
	if withWork {
		p.work <- s
	} else {
		s.ready <- struct{}{}
	}
}

// finish finishes the slots in order; after an error it only frees them,
// so that Take never waits forever, and Take reports the error.
func (p *Pipeline[T]) finish(f func(*T) error) {
	var err error
	for s := range p.order {
		<-s.ready
		if err == nil {
			if err = f(&s.V); err != nil {
				p.failed.Store(&err)
			}
		}
		p.free <- s
	}
	p.done <- err
}

// Close waits for every slot put to be finished, stops the goroutines and
// returns finish's first error; later calls return nil.
func (p *Pipeline[T]) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	close(p.work)
	p.workers.Wait()
	close(p.order)
	return <-p.done
}
