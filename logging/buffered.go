package logging

import (
	"io"
	"sync"
	"time"
)

// Buffered batches writes to w: lines collect in memory and go out in one
// write every flush interval, or at once when maxBytes are waiting, like
// Nginx's `access_log ... buffer= flush=`. A line is never split and never
// waits longer than the interval. Close flushes what is left.
type Buffered struct {
	w        io.Writer
	maxBytes int

	mu   sync.Mutex
	buf  []byte
	stop chan struct{}
	done chan struct{}
}

// NewBuffered starts a Buffered writer flushing every interval.
func NewBuffered(w io.Writer, interval time.Duration, maxBytes int) *Buffered {
	b := &Buffered{w: w, maxBytes: maxBytes, buf: make([]byte, 0, maxBytes),
		stop: make(chan struct{}), done: make(chan struct{})}
	go b.loop(interval)
	return b
}

func (b *Buffered) loop(interval time.Duration) {
	defer close(b.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			b.Flush()
		case <-b.stop:
			b.Flush()
			return
		}
	}
}

// Write queues p; it writes through at once when the buffer is full.
func (b *Buffered) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf)+len(p) > b.maxBytes {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > b.maxBytes {
			return b.w.Write(p)
		}
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// Flush writes what is waiting.
func (b *Buffered) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}

func (b *Buffered) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.w.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

// Close stops the flusher after a last flush.
func (b *Buffered) Close() error {
	select {
	case <-b.stop:
	default:
		close(b.stop)
	}
	<-b.done
	return nil
}
