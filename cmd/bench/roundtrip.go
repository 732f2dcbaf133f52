package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// loopbackRoundTrip is the median time of one sequential request/response on
// this machine's loopback (a Redis PING from one client). The gateway's path
// chains several such hops, so this number, not the handler code, sets the
// floor of its latency.
func loopbackRoundTrip(ctx context.Context, redisURL string, n int) (time.Duration, error) {
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return 0, err
	}
	client := redis.NewClient(opts)
	defer client.Close()
	samples := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := client.Ping(ctx).Err(); err != nil {
			return 0, fmt.Errorf("redis ping: %w", err)
		}
		samples = append(samples, time.Since(start))
	}
	slices.Sort(samples)
	return samples[len(samples)/2], nil
}
