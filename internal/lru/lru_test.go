package lru

import (
	"fmt"
	"sync"
	"testing"
)

// TestTheLeastRecentlyUsedGoFirst: past the bound, the values used least
// recently are evicted; a value larger than the bound is never kept.
func TestTheLeastRecentlyUsedGoFirst(t *testing.T) {
	c := New[string](30)
	c.Add("a", "A", 10)
	c.Add("b", "B", 10)
	c.Add("c", "C", 10)
	if _, ok := c.Get("a"); !ok { // a is now the most recent
		t.Fatal("a was evicted within the bound")
	}
	c.Add("d", "D", 10)
	if _, ok := c.Get("b"); ok {
		t.Error("b, the least recently used, was kept past the bound")
	}
	for _, k := range []string{"a", "c", "d"} {
		if v, ok := c.Get(k); !ok || v != string(k[0]-32) {
			t.Errorf("%s: %q %v", k, v, ok)
		}
	}
	c.Add("huge", "H", 31)
	if _, ok := c.Get("huge"); ok {
		t.Error("a value over the whole bound was kept")
	}
	if _, ok := c.Get("a"); !ok {
		t.Error("a value over the bound evicted the others")
	}
	if c.Hits() != 5 {
		t.Errorf("%d hits, want 5", c.Hits())
	}
}

// TestConcurrentUse runs under the race detector in make test.
func TestConcurrentUse(t *testing.T) {
	c := New[int](100)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				k := fmt.Sprint((i + j) % 20)
				c.Add(k, j, 7)
				c.Get(k)
			}
		}(i)
	}
	wg.Wait()
	if c.size > c.max {
		t.Errorf("the cache holds %d bytes, over its %d", c.size, c.max)
	}
}
