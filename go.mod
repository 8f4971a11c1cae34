module github.com/hermes-box/hermes-box

go 1.26.0
