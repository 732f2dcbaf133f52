module github.com/esimplatform/esim/libs/config

go 1.26

require github.com/sethvargo/go-envconfig v1.4.3
