// Package redisurl reads the REDIS_URL of the services that use Redis, as
// go-redis does, with errors that never quote it: net/url's quote the
// whole URL, password included, and a config error is logged.
package redisurl

import (
	"errors"
	"fmt"
	"net/url"

	goredis "github.com/redis/go-redis/v9"
)

// Parse reads redisURL into go-redis's options.
func Parse(redisURL string) (*goredis.Options, error) {
	opts, err := goredis.ParseURL(redisURL)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return nil, err
	}
	return opts, nil
}

// Check reports why Parse would refuse redisURL, or nil, in words for a
// configuration check that reports it with every other bad setting.
func Check(redisURL string) error {
	if _, err := Parse(redisURL); err != nil {
		return fmt.Errorf("want redis://[:password@]host:6379/0, or rediss:// for TLS (%w)", err)
	}
	return nil
}
