package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progressAfter is how long a run goes quietly before it reports its phase on stderr.
const progressAfter = 2 * time.Second

// progress reports a long run's phase on stderr, never stdout (which stays parseable with -o
// json): once the run has taken progressAfter, a line each second the phase has changed
// ("reading input: 45000 objects", "preview: round 3"). It reports only to a real file
// (a terminal, or a log a pipe leads to); to any other writer it says nothing.
type progress struct {
	w     io.Writer
	start time.Time
	mu    sync.Mutex
	phase string
	done  chan struct{}
	wg    sync.WaitGroup
}

// startProgress starts reporting to w when it is an *os.File; stop must be called.
func startProgress(w io.Writer) *progress {
	p := &progress{w: w, start: time.Now(), done: make(chan struct{})}
	if _, ok := w.(*os.File); !ok {
		return p
	}
	p.wg.Add(1)
	go p.loop()
	return p
}

// set records the phase the run is in (safe from any goroutine; a nil progress ignores it).
func (p *progress) set(format string, args ...any) {
	if p == nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	p.mu.Lock()
	p.phase = msg
	p.mu.Unlock()
}

func (p *progress) loop() {
	defer p.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := ""
	for {
		select {
		case <-p.done:
			return
		case <-tick.C:
		}
		elapsed := time.Since(p.start)
		p.mu.Lock()
		phase := p.phase
		p.mu.Unlock()
		if elapsed < progressAfter || phase == "" || phase == last {
			continue
		}
		last = phase
		fmt.Fprintf(p.w, "dovetail plan: %4.0fs %s\n", elapsed.Seconds(), phase)
	}
}

// stop ends the reports; after it returns nothing more is written.
func (p *progress) stop() {
	close(p.done)
	p.wg.Wait()
}
