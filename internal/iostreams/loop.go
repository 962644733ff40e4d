package iostreams

import (
	"sync"
	"time"
)

// Loop runs a redraw on a ticker until stopped: the one repaint loop behind
// a step's spinner and heartbeat and grade's live table.
type Loop struct {
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// StartLoop calls tick every interval (and once at once when immediately is
// set) until Stop; then it calls last, if any, so the final state is drawn.
func StartLoop(every time.Duration, immediately bool, tick, last func()) *Loop {
	l := &Loop{done: make(chan struct{})}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		if immediately {
			tick()
		}
		for {
			select {
			case <-l.done:
				if last != nil {
					last()
				}
				return
			case <-t.C:
				tick()
			}
		}
	}()
	return l
}

// Stop ends the loop and waits for its last draw; calling it again does nothing.
func (l *Loop) Stop() {
	l.once.Do(func() { close(l.done) })
	l.wg.Wait()
}
