package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// getPlansRoute is the catalogue's Twirp route for plan lookups, as its
// request metrics name it.
const getPlansRoute = `http_route="/twirp/esim.catalogue.v1.Catalogue/GetPlans"`

// countGetPlansCalls reads from the catalogue's /metrics how many GetPlans
// calls it has served so far, whatever their outcome.
func countGetPlansCalls(ctx context.Context, catalogueURL string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, catalogueURL+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read catalogue metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("read catalogue metrics: %s", resp.Status)
	}
	var total float64
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		if !strings.HasPrefix(line, "http_server_request_duration_seconds_count{") || !strings.Contains(line, getPlansRoute) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("catalogue metrics: %q: %w", line, err)
		}
		total += v
	}
	if err := lines.Err(); err != nil {
		return 0, fmt.Errorf("read catalogue metrics: %w", err)
	}
	return total, nil
}

// countRedisScriptCalls reads from Redis's command statistics how many
// scripts it has run so far: the gateway's rate-limit calls, its only
// scripts (the auth cache is plain GET and SET). The count is the server's,
// so nothing else may be using Redis while the benchmark runs.
func countRedisScriptCalls(ctx context.Context, rdb *goredis.Client) (float64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, fmt.Errorf("read redis command statistics: %w", err)
	}
	var total float64
	for line := range strings.Lines(info) {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
		v, err := strconv.ParseFloat(calls, 64)
		if err != nil {
			return 0, fmt.Errorf("redis command statistics: %q: %w", line, err)
		}
		total += v
	}
	return total, nil
}

// callCounts are the backend calls served so far.
type callCounts struct {
	getPlans, redisScripts float64
}

func countCalls(ctx context.Context, catalogueURL string, rdb *goredis.Client) (callCounts, error) {
	var c callCounts
	var err error
	if c.getPlans, err = countGetPlansCalls(ctx, catalogueURL); err != nil {
		return c, err
	}
	c.redisScripts, err = countRedisScriptCalls(ctx, rdb)
	return c, err
}
