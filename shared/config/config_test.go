package config

import (
	"errors"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

const (
	testCommit = "0123456789abcdef0123456789abcdef01234567"
	testDigest = "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"
	testImage  = "registry.example:5000/team/executor:v2@sha256:" + testDigest
)

// project returns a new project root holding hermes-box.conf with conf and,
// when secrets is non-empty, secret-env.txt.
func project(t *testing.T, conf, secrets string) string {
	t.Helper()
	root := t.TempDir()
	writeFile(t, filepath.Join(root, FileName), conf)
	if secrets != "" {
		writeFile(t, filepath.Join(root, SecretsFileName), secrets)
	}
	return root
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// expand replaces FILE and SECRETS in want with the paths under root.
func expand(want, root string) string {
	want = strings.ReplaceAll(want, "FILE", filepath.Join(root, FileName))
	return strings.ReplaceAll(want, "SECRETS", filepath.Join(root, SecretsFileName))
}

func TestDefault(t *testing.T) {
	got := Default("/p/../project/")
	want := &Config{
		ProjectRoot:     "/project",
		File:            "/project/hermes-box.conf",
		MachineName:     "hermes-box",
		BuilderName:     "hermes-builder",
		SSHPort:         2222,
		CPUs:            4,
		MemoryMiB:       8192,
		StorageGB:       15,
		OverlayGB:       6,
		NetworkMode:     NetworkFull,
		VMMConfinement:  ConfinementEnforce,
		HermesCommit:    "3ef6bbd201263d354fd83ec55b3c306ded2eb72a",
		ExecutorEnabled: false,
		// Incremental snapshots are the default; false opts out (v2).
		SnapshotIncremental: true,
		ExecutorPort:        4788,
		ExecutorImage:       "ghcr.io/usefulsoftwareco/executor-selfhost:v1.6.8@sha256:527e014ce0641e9d569314561fba2a37b872ffd5074471b9bc48b66611ecb090",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Default = %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("Validate(Default) = %v", err)
	}
	got.ExecutorEnabled = true
	if err := got.Validate(); err != nil {
		t.Errorf("Validate(Default with Executor enabled) = %v", err)
	}
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		conf    string
		secrets string
		env     []string
		want    func(c *Config) // applied to the defaults
	}{
		{name: "no file", want: func(*Config) {}},
		{name: "empty file", conf: "\n# nothing\n", want: func(*Config) {}},
		{name: "file sets a value", conf: "HERMES_BOX_SSH_PORT=2300", want: func(c *Config) { c.SSHPort = 2300 }},
		{
			name: "env beats file",
			conf: "HERMES_BOX_SSH_PORT=2300\nHERMES_BOX_CPUS=2",
			env:  []string{"HERMES_BOX_SSH_PORT=2400"},
			want: func(c *Config) { c.SSHPort, c.CPUs = 2400, 2 },
		},
		{
			name: "empty env value restores the default",
			conf: "HERMES_BOX_SSH_PORT=2300\nHERMES_BOX_EXECUTOR_ENABLED=true",
			env:  []string{"HERMES_BOX_SSH_PORT=", "HERMES_BOX_EXECUTOR_ENABLED="},
			want: func(*Config) {},
		},
		{
			name: "empty file values are defaults",
			conf: "HERMES_BOX_MACHINE_NAME=\nHERMES_BOX_BUILDER_NAME=''\nHERMES_BOX_SSH_PORT=\"\"\n" +
				"HERMES_BOX_CPUS=\nHERMES_BOX_NETWORK_MODE=\nHERMES_BOX_HERMES_COMMIT=\nHERMES_BOX_EXECUTOR_ENABLED=\n" +
				"HERMES_BOX_EXECUTOR_IMAGE=\nHERMES_BOX_DATA_DIR=\nHERMES_BOX_SSH_KEY=\nHERMES_BOX_UV_SHA256=\n",
			want: func(*Config) {},
		},
		{name: "later env entry wins", env: []string{"HERMES_BOX_CPUS=2", "HERMES_BOX_CPUS=5"}, want: func(c *Config) { c.CPUs = 5 }},
		{name: "other names in file ignored", conf: "EDITOR=vim\nHERMES_INSTALL_COMMIT=x", want: func(*Config) {}},
		{name: "other names in env ignored", env: []string{"PATH=/bin", "HERMES_INSTALL_COMMIT=x", "HERMES_BOXX=1", "noequals"}, want: func(*Config) {}},
		{
			name: "control names allowed in env",
			env:  []string{"HERMES_BOX_E2E=1", "HERMES_BOX_PROJECT_ROOT=/elsewhere", "HERMES_BOX_CONFIG="},
			want: func(*Config) {},
		},
		{
			name:    "secret host names allowed in env",
			secrets: "TELEGRAM_BOT_TOKEN=HERMES_BOX_TELEGRAM_BOT_TOKEN\n",
			env:     []string{"HERMES_BOX_TELEGRAM_BOT_TOKEN=123:abc"},
			want: func(c *Config) {
				c.Secrets = []SecretMapping{{Guest: "TELEGRAM_BOT_TOKEN", Host: "HERMES_BOX_TELEGRAM_BOT_TOKEN", Line: 1}}
			},
		},
		{
			name: "shell syntax kept literally",
			conf: "HERMES_BOX_SSH_KEY=$(touch x)\nHERMES_BOX_DATA_DIR=`pwd`/data",
			want: func(c *Config) { c.SSHKeyOverride, c.DataDirOverride = "$(touch x)", "`pwd`/data" },
		},
		{
			name: "every key",
			conf: "export HERMES_BOX_MACHINE_NAME = 'box_two' # c\nHERMES_BOX_BUILDER_NAME=\"b\\u005fx\"\n" +
				"HERMES_BOX_SSH_PORT=65535\nHERMES_BOX_CPUS=1\nHERMES_BOX_MEMORY_MIB=1024\nHERMES_BOX_STORAGE_GB=20\n" +
				"HERMES_BOX_OVERLAY_GB=1\nHERMES_BOX_NETWORK_MODE=strict\nHERMES_BOX_HERMES_COMMIT=" + strings.ToUpper(testCommit) + "\n" +
				"HERMES_BOX_EXECUTOR_ENABLED=1\nHERMES_BOX_EXECUTOR_PORT=1\nHERMES_BOX_EXECUTOR_IMAGE=" + testImage + "\n" +
				"HERMES_BOX_DATA_DIR=/data\nHERMES_BOX_SSH_KEY=keys/id\nHERMES_BOX_UV_SHA256=" + testDigest + "\n",
			env: []string{"HERMES_BOX_CODEX_SHA256=" + testDigest, "HERMES_BOX_NETWORK_MODE=none"},
			want: func(c *Config) {
				c.MachineName, c.BuilderName, c.SSHPort, c.CPUs = "box_two", "b_x", 65535, 1
				c.MemoryMiB, c.StorageGB, c.OverlayGB, c.NetworkMode = 1024, 20, 1, NetworkNone
				c.HermesCommit, c.ExecutorEnabled, c.ExecutorPort = strings.ToUpper(testCommit), true, 1
				c.ExecutorImage, c.DataDirOverride, c.SSHKeyOverride = testImage, "/data", "keys/id"
				c.UVSHA256, c.CodexSHA256 = testDigest, testDigest
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := project(t, tt.conf, tt.secrets)
			got, err := Load(root, tt.env)
			if err != nil {
				t.Fatalf("Load error: %v", err)
			}
			want := Default(root)
			tt.want(want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Load = %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestLoadConfigPath(t *testing.T) {
	root := project(t, "HERMES_BOX_CPUS=2", "")
	other := filepath.Join(t.TempDir(), "other.conf")
	writeFile(t, other, "HERMES_BOX_CPUS=7")
	tests := []struct {
		name     string
		env      []string
		wantFile string
		wantCPUs int
	}{
		{"default path", nil, filepath.Join(root, FileName), 2},
		{"HERMES_BOX_CONFIG replaces the file", []string{"HERMES_BOX_CONFIG=" + other}, other, 7},
		{"empty HERMES_BOX_CONFIG means the default path", []string{"HERMES_BOX_CONFIG="}, filepath.Join(root, FileName), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(root, tt.env)
			if err != nil {
				t.Fatalf("Load error: %v", err)
			}
			if c.File != tt.wantFile || c.CPUs != tt.wantCPUs {
				t.Errorf("Load: File %q CPUs %d, want %q %d", c.File, c.CPUs, tt.wantFile, tt.wantCPUs)
			}
		})
	}
}

func TestLoadRelativeRoot(t *testing.T) {
	root := project(t, "", "")
	t.Chdir(root)
	c, err := Load(".", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(c.ProjectRoot) || c.File != filepath.Join(c.ProjectRoot, FileName) {
		t.Errorf("Load(\".\"): ProjectRoot %q File %q, want absolute paths", c.ProjectRoot, c.File)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name    string
		conf    string
		secrets string
		env     []string
		wantErr string // FILE and SECRETS stand for the paths
	}{
		{name: "syntax error", conf: "A=1\nrm -rf /", wantErr: "FILE:2: expected KEY=VALUE assignment"},
		{name: "unknown key in file", conf: "A=1\nHERMES_BOX_NOPE=1", wantErr: `FILE:2: unknown Hermes Box setting "HERMES_BOX_NOPE"`},
		{name: "control name in file", conf: "HERMES_BOX_CONFIG=/x", wantErr: `FILE:1: unknown Hermes Box setting "HERMES_BOX_CONFIG"`},
		{name: "replaced key in file", conf: "HERMES_BOX_SMOLVM_ALLOW_NEWER=true", wantErr: "FILE:1: HERMES_BOX_SMOLVM_ALLOW_NEWER was replaced by `hermes-box doctor`, which qualifies a newer smolvm on this host (a release that passes is accepted for that binary); remove the setting"},
		{
			name:    "secret host name in file",
			conf:    "HERMES_BOX_TOKEN=x",
			secrets: "TOKEN=HERMES_BOX_TOKEN",
			wantErr: `FILE:1: unknown Hermes Box setting "HERMES_BOX_TOKEN"`,
		},
		{name: "lower-case key in file", conf: "hermes_box_ssh_port=2300", wantErr: `FILE:1: "hermes_box_ssh_port" is not a setting: settings are upper-case (HERMES_BOX_SSH_PORT)`},
		{name: "mixed-case key in file", conf: "Hermes_Box_Cpus=2", wantErr: `FILE:1: "Hermes_Box_Cpus" is not a setting: settings are upper-case (HERMES_BOX_CPUS)`},
		{name: "key set twice", conf: "HERMES_BOX_CPUS=2\n# again\nHERMES_BOX_CPUS=3", wantErr: "FILE:3: HERMES_BOX_CPUS is set twice (lines 1 and 3): keep one"},
		{name: "missing HERMES_BOX_CONFIG file", env: []string{"HERMES_BOX_CONFIG=/nonexistent/hermes-box.conf"},
			wantErr: "HERMES_BOX_CONFIG names /nonexistent/hermes-box.conf, which does not exist"},
		{name: "unknown key in env", env: []string{"HERMES_BOX_NOPE=1"}, wantErr: `unknown Hermes Box environment setting "HERMES_BOX_NOPE"`},
		{name: "guest-only name in env", env: []string{"HERMES_BOX_RESTORE_MODE=1"}, wantErr: `unknown Hermes Box environment setting "HERMES_BOX_RESTORE_MODE"`},
		{
			name:    "all problems reported",
			conf:    "HERMES_BOX_A=1\nHERMES_BOX_CPUS=x",
			env:     []string{"HERMES_BOX_B=1"},
			wantErr: "FILE:1: unknown Hermes Box setting \"HERMES_BOX_A\"\nFILE:2: HERMES_BOX_CPUS must be an integer, got \"x\"\nunknown Hermes Box environment setting \"HERMES_BOX_B\"",
		},
		{name: "bad secret mappings", secrets: "A=B\n$(cat secret)\n", wantErr: "SECRETS:2: expected GUEST_VARIABLE=HOST_VARIABLE"},
		{
			name:    "secret host is a setting",
			secrets: "# c\nPORT=HERMES_BOX_SSH_PORT",
			wantErr: `SECRETS:2: host variable "HERMES_BOX_SSH_PORT" is a Hermes Box setting and cannot hold a secret`,
		},
		{
			name:    "secret host is a control name",
			secrets: "E=HERMES_BOX_E2E",
			wantErr: `SECRETS:1: host variable "HERMES_BOX_E2E" is a Hermes Box setting and cannot hold a secret`,
		},
		{name: "negative retention count", conf: "HERMES_BOX_PRUNE_KEEP_LAST=2\nHERMES_BOX_PRUNE_KEEP_DAILY=-1",
			wantErr: "FILE:2: HERMES_BOX_PRUNE_KEEP_DAILY must be at least 0, got -1"},
		{name: "retention count not a number", env: []string{"HERMES_BOX_PRUNE_KEEP_WEEKLY=four"},
			wantErr: `environment variable HERMES_BOX_PRUNE_KEEP_WEEKLY must be an integer, got "four"`},
		{name: "validation after loading", conf: "HERMES_BOX_EXECUTOR_ENABLED=true\nHERMES_BOX_EXECUTOR_PORT=2222",
			wantErr: "HERMES_BOX_EXECUTOR_PORT must differ from HERMES_BOX_SSH_PORT, both are 2222"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := project(t, tt.conf, tt.secrets)
			c, err := Load(root, tt.env)
			if err == nil {
				t.Fatalf("Load = %+v, want error", c)
			}
			if want := expand(tt.wantErr, root); err.Error() != want {
				t.Errorf("Load error = %q, want %q", err, want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Load error %v does not match ErrInvalid", err)
			}
		})
	}
}

// TestLoadSettingValues covers the parsing and validation of every key, from
// the file and from the environment.
func TestLoadSettingValues(t *testing.T) {
	tests := []struct {
		name    string
		conf    string
		env     []string
		wantErr string // "" for success; FILE stands for the file's path
	}{
		{name: "machine name equals builder", conf: "HERMES_BOX_MACHINE_NAME=b\nHERMES_BOX_BUILDER_NAME=b",
			wantErr: `HERMES_BOX_MACHINE_NAME must differ from HERMES_BOX_BUILDER_NAME, both are "b"`},
		{name: "ssh port 1", conf: "HERMES_BOX_SSH_PORT=1"},
		{name: "ssh port 65535", conf: "HERMES_BOX_SSH_PORT=65535"},
		{name: "ssh port 0", conf: "HERMES_BOX_SSH_PORT=0", wantErr: "FILE:1: HERMES_BOX_SSH_PORT must be a port from 1 to 65535, got 0"},
		{name: "ssh port 65536", conf: "HERMES_BOX_SSH_PORT=65536", wantErr: "FILE:1: HERMES_BOX_SSH_PORT must be a port from 1 to 65535, got 65536"},
		{name: "ssh port abc", conf: "HERMES_BOX_SSH_PORT=abc", wantErr: `FILE:1: HERMES_BOX_SSH_PORT must be an integer, got "abc"`},
		{name: "ssh port quoted with space", conf: `HERMES_BOX_SSH_PORT=" 22"`, wantErr: `FILE:1: HERMES_BOX_SSH_PORT must be an integer, got " 22"`},
		{name: "ssh port 0 in env", env: []string{"HERMES_BOX_SSH_PORT=0"},
			wantErr: "environment variable HERMES_BOX_SSH_PORT must be a port from 1 to 65535, got 0"},
		{name: "ssh port 65536 in env", env: []string{"HERMES_BOX_SSH_PORT=65536"},
			wantErr: "environment variable HERMES_BOX_SSH_PORT must be a port from 1 to 65535, got 65536"},
		{name: "ssh port abc in env", env: []string{"HERMES_BOX_SSH_PORT=abc"},
			wantErr: `environment variable HERMES_BOX_SSH_PORT must be an integer, got "abc"`},
		{name: "cpus 0", conf: "HERMES_BOX_CPUS=0", wantErr: "FILE:1: HERMES_BOX_CPUS must be at least 1, got 0"},
		{name: "cpus 1.5", conf: "HERMES_BOX_CPUS=1.5", wantErr: `FILE:1: HERMES_BOX_CPUS must be an integer, got "1.5"`},
		{name: "memory negative", conf: "HERMES_BOX_MEMORY_MIB=-1", wantErr: "FILE:1: HERMES_BOX_MEMORY_MIB must be at least 1, got -1"},
		{name: "storage 0 in env", env: []string{"HERMES_BOX_STORAGE_GB=0"},
			wantErr: "environment variable HERMES_BOX_STORAGE_GB must be at least 1, got 0"},
		{name: "overlay 0", conf: "HERMES_BOX_OVERLAY_GB=0", wantErr: "FILE:1: HERMES_BOX_OVERLAY_GB must be at least 1, got 0"},
		{name: "network strict", conf: "HERMES_BOX_NETWORK_MODE=strict"},
		{name: "network none", conf: "HERMES_BOX_NETWORK_MODE=none"},
		{name: "network unknown", conf: "HERMES_BOX_NETWORK_MODE=Full",
			wantErr: `FILE:1: HERMES_BOX_NETWORK_MODE must be one of full, strict or none, got "Full"`},
		{name: "commit uppercase", conf: "HERMES_BOX_HERMES_COMMIT=" + strings.ToUpper(testCommit)},
		{name: "commit short", conf: "HERMES_BOX_HERMES_COMMIT=" + testCommit[:39],
			wantErr: `FILE:1: HERMES_BOX_HERMES_COMMIT must be a 40-character hexadecimal commit id, got "` + testCommit[:39] + `"`},
		{name: "commit long", env: []string{"HERMES_BOX_HERMES_COMMIT=" + testCommit + "0"},
			wantErr: `environment variable HERMES_BOX_HERMES_COMMIT must be a 40-character hexadecimal commit id, got "` + testCommit + `0"`},
		{name: "commit not hex", conf: "HERMES_BOX_HERMES_COMMIT=" + testCommit[:39] + "g",
			wantErr: `FILE:1: HERMES_BOX_HERMES_COMMIT must be a 40-character hexadecimal commit id, got "` + testCommit[:39] + `g"`},
		{name: "bool 1", conf: "HERMES_BOX_EXECUTOR_ENABLED=1"},
		{name: "bool TRUE", conf: "HERMES_BOX_EXECUTOR_ENABLED=TRUE"},
		{name: "bool f", conf: "HERMES_BOX_EXECUTOR_ENABLED=f"},
		{name: "bool yes", conf: "HERMES_BOX_EXECUTOR_ENABLED=yes", wantErr: `FILE:1: HERMES_BOX_EXECUTOR_ENABLED must be true or false, got "yes"`},
		{name: "bool yes in env", env: []string{"HERMES_BOX_EXECUTOR_ENABLED=yes"},
			wantErr: `environment variable HERMES_BOX_EXECUTOR_ENABLED must be true or false, got "yes"`},
		{name: "executor port abc", conf: "HERMES_BOX_EXECUTOR_PORT=abc", wantErr: `FILE:1: HERMES_BOX_EXECUTOR_PORT must be an integer, got "abc"`},
		{name: "executor port equals ssh port when disabled", conf: "HERMES_BOX_EXECUTOR_PORT=2222"},
		{name: "executor port equals ssh port when enabled", conf: "HERMES_BOX_EXECUTOR_PORT=2222", env: []string{"HERMES_BOX_EXECUTOR_ENABLED=true"},
			wantErr: "HERMES_BOX_EXECUTOR_PORT must differ from HERMES_BOX_SSH_PORT, both are 2222"},
		{name: "executor port 0 when disabled", conf: "HERMES_BOX_EXECUTOR_PORT=0"},
		{name: "executor port 0 when enabled", conf: "HERMES_BOX_EXECUTOR_ENABLED=true\nHERMES_BOX_EXECUTOR_PORT=0",
			wantErr: "HERMES_BOX_EXECUTOR_PORT must be a port from 1 to 65535, got 0"},
		{name: "executor port 65536 when enabled", conf: "HERMES_BOX_EXECUTOR_ENABLED=true\nHERMES_BOX_EXECUTOR_PORT=65536",
			wantErr: "HERMES_BOX_EXECUTOR_PORT must be a port from 1 to 65535, got 65536"},
		{name: "image without digest when disabled", conf: "HERMES_BOX_EXECUTOR_IMAGE=executor:v1"},
		{name: "image in upstream's current namespace", conf: "HERMES_BOX_EXECUTOR_ENABLED=true\nHERMES_BOX_EXECUTOR_IMAGE=ghcr.io/usefulsoftwareco/executor-selfhost:v1.5.35@sha256:" + testDigest},
		{name: "image without digest when enabled", conf: "HERMES_BOX_EXECUTOR_ENABLED=true\nHERMES_BOX_EXECUTOR_IMAGE=executor:v1",
			wantErr: `HERMES_BOX_EXECUTOR_IMAGE must be pinned as NAME:TAG@sha256:<64 lowercase hex>, got "executor:v1"`},
		{name: "image with short digest", conf: "HERMES_BOX_EXECUTOR_ENABLED=true\nHERMES_BOX_EXECUTOR_IMAGE=executor:v1@sha256:" + testDigest[:63],
			wantErr: `HERMES_BOX_EXECUTOR_IMAGE must be pinned as NAME:TAG@sha256:<64 lowercase hex>, got "executor:v1@sha256:` + testDigest[:63] + `"`},
		{name: "image without tag", conf: "HERMES_BOX_EXECUTOR_ENABLED=true\nHERMES_BOX_EXECUTOR_IMAGE=host:5000/executor@sha256:" + testDigest,
			wantErr: `HERMES_BOX_EXECUTOR_IMAGE must have a tag in NAME:TAG@sha256:<digest>, got "host:5000/executor@sha256:` + testDigest + `"`},
		{name: "image with empty tag", conf: "HERMES_BOX_EXECUTOR_ENABLED=true\nHERMES_BOX_EXECUTOR_IMAGE=executor:@sha256:" + testDigest,
			wantErr: `HERMES_BOX_EXECUTOR_IMAGE must have a tag in NAME:TAG@sha256:<digest>, got "executor:@sha256:` + testDigest + `"`},
		{name: "image without name", conf: "HERMES_BOX_EXECUTOR_ENABLED=true\nHERMES_BOX_EXECUTOR_IMAGE=@sha256:" + testDigest,
			wantErr: `HERMES_BOX_EXECUTOR_IMAGE must name an image before the digest, got "@sha256:` + testDigest + `"`},
		{name: "image with whitespace when enabled", conf: "HERMES_BOX_EXECUTOR_ENABLED=true\nHERMES_BOX_EXECUTOR_IMAGE='exec utor:v1@sha256:" + testDigest + "'",
			wantErr: `HERMES_BOX_EXECUTOR_IMAGE must not contain whitespace, got "exec utor:v1@sha256:` + testDigest + `"`},
		{name: "image with whitespace when disabled", conf: "HERMES_BOX_EXECUTOR_IMAGE='exec utor:v1'"},
		{name: "image pinned when enabled", conf: "HERMES_BOX_EXECUTOR_ENABLED=true\nHERMES_BOX_EXECUTOR_IMAGE=" + testImage},
		{name: "uv sha256", conf: "HERMES_BOX_UV_SHA256=" + testDigest},
		{name: "uv sha256 uppercase", conf: "HERMES_BOX_UV_SHA256=" + strings.ToUpper(testDigest),
			wantErr: `FILE:1: HERMES_BOX_UV_SHA256 must be 64 lowercase hexadecimal characters, got "` + strings.ToUpper(testDigest) + `"`},
		{name: "uv sha256 short", conf: "HERMES_BOX_UV_SHA256=abc",
			wantErr: `FILE:1: HERMES_BOX_UV_SHA256 must be 64 lowercase hexadecimal characters, got "abc"`},
		{name: "codex sha256", env: []string{"HERMES_BOX_CODEX_SHA256=" + testDigest}},
		{name: "codex sha256 not hex", env: []string{"HERMES_BOX_CODEX_SHA256=" + testDigest[:63] + "z"},
			wantErr: `environment variable HERMES_BOX_CODEX_SHA256 must be 64 lowercase hexadecimal characters, got "` + testDigest[:63] + `z"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := project(t, tt.conf, "")
			c, err := Load(root, tt.env)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Load error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Load = %+v, want error", c)
			}
			if want := expand(tt.wantErr, root); err.Error() != want {
				t.Errorf("Load error = %q, want %q", err, want)
			}
			var cerr *Error
			if !errors.As(err, &cerr) || cerr.Key == "" {
				t.Errorf("Load error %v is not an *Error with a Key", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(c *Config)
		wantErr string
	}{
		{"defaults", func(*Config) {}, ""},
		{"empty machine name", func(c *Config) { c.MachineName = "" }, "HERMES_BOX_MACHINE_NAME must not be empty"},
		{"empty builder name", func(c *Config) { c.BuilderName = "" }, "HERMES_BOX_BUILDER_NAME must not be empty"},
		{"dotted machine name", func(c *Config) { c.MachineName = "box.v2" }, `HERMES_BOX_MACHINE_NAME may hold only letters, digits, '-' and '_' (smolvm's rule), got "box.v2"`},
		{"confinement", func(c *Config) { c.VMMConfinement = "audit" }, `HERMES_BOX_VMM_CONFINEMENT must be enforce or off, got "audit"`},
		{"builder name ending in a hyphen", func(c *Config) { c.BuilderName = "builder-" }, `HERMES_BOX_BUILDER_NAME must not end with a hyphen, got "builder-"`},
		{"ssh port", func(c *Config) { c.SSHPort = -5 }, "HERMES_BOX_SSH_PORT must be a port from 1 to 65535, got -5"},
		{"empty network mode", func(c *Config) { c.NetworkMode = "" }, `HERMES_BOX_NETWORK_MODE must be one of full, strict or none, got ""`},
		{"empty commit", func(c *Config) { c.HermesCommit = "" }, `HERMES_BOX_HERMES_COMMIT must be a 40-character hexadecimal commit id, got ""`},
		{"empty image when enabled", func(c *Config) { c.ExecutorEnabled, c.ExecutorImage = true, "" },
			`HERMES_BOX_EXECUTOR_IMAGE must be pinned as NAME:TAG@sha256:<64 lowercase hex>, got ""`},
		{"several problems", func(c *Config) { c.CPUs, c.OverlayGB = 0, 0 },
			"HERMES_BOX_CPUS must be at least 1, got 0\nHERMES_BOX_OVERLAY_GB must be at least 1, got 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default("/project")
			tt.change(c)
			err := c.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate error: %v", err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("Validate error = %v, want %q", err, tt.wantErr)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Validate error %v does not match ErrInvalid", err)
			}
		})
	}
}

func TestLoadShellLineRunsNothing(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "x")
	root := project(t, "HERMES_BOX_CPUS=2\ntouch "+marker+"\n", "")
	_, err := Load(root, nil)
	if want := filepath.Join(root, FileName) + ":2: expected KEY=VALUE assignment"; err == nil || err.Error() != want {
		t.Errorf("Load error = %v, want %q", err, want)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("marker %s exists after Load (stat error %v)", marker, err)
	}
}

func TestLoadNeverPrintsSecrets(t *testing.T) {
	const secret = "s3cret-value-do-not-print"
	root := project(t, "HERMES_BOX_CPUS=0", "TOKEN=HERMES_BOX_TOKEN\nOTHER=OPENAI_API_KEY")
	_, err := Load(root, []string{"HERMES_BOX_TOKEN=" + secret, "OPENAI_API_KEY=" + secret, "HERMES_BOX_NOPE=" + secret})
	if err == nil {
		t.Fatal("Load succeeded, want errors")
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("Load error %q contains a secret value", err)
	}
}

func TestPaths(t *testing.T) {
	tests := []struct {
		name              string
		dataDir, sshKey   string
		wantData, wantKey string // relative to the project root unless absolute
		wantExternal      bool
	}{
		{"defaults", "", "", ".", "state/hermes-box-ed25519", false},
		{"relative data dir", "data/../box", "", "box", "box/state/hermes-box-ed25519", false},
		{"absolute data dir", "/srv//box/", "", "/srv/box", "/srv/box/state/hermes-box-ed25519", false},
		{"relative key joined to the root, not the data dir", "/srv/box", "keys/id", "/srv/box", "keys/id", true},
		{"absolute key", "", "/home/u/.ssh/../id", ".", "/home/u/id", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := project(t, "HERMES_BOX_DATA_DIR="+strconv.Quote(tt.dataDir)+"\nHERMES_BOX_SSH_KEY="+tt.sshKey, "")
			c, err := Load(root, nil)
			if err != nil {
				t.Fatal(err)
			}
			abs := func(p string) string {
				if filepath.IsAbs(p) {
					return p
				}
				return filepath.Join(root, p)
			}
			data := abs(tt.wantData)
			checks := []struct{ what, got, want string }{
				{"DataDir", c.DataDir(), data},
				{"StateDir", c.StateDir(), filepath.Join(data, "state")},
				{"BackupsDir", c.BackupsDir(), filepath.Join(data, "backups")},
				{"ImagesDir", c.ImagesDir(), filepath.Join(data, "images")},
				{"SSHKeyPath", c.SSHKeyPath(), abs(tt.wantKey)},
			}
			for _, ck := range checks {
				if ck.got != ck.want {
					t.Errorf("%s = %q, want %q", ck.what, ck.got, ck.want)
				}
			}
			if c.ExternalSSHKey() != tt.wantExternal {
				t.Errorf("ExternalSSHKey = %v, want %v", c.ExternalSSHKey(), tt.wantExternal)
			}
		})
	}
}

func TestAssignmentsRoundTrip(t *testing.T) {
	c := Default(t.TempDir())
	c.MachineName, c.SSHPort, c.NetworkMode = "box-2_b", 2300, NetworkStrict
	c.ExecutorEnabled, c.ExecutorImage, c.DataDirOverride = true, testImage, `odd "data" dir #1`
	c.SSHKeyOverride, c.CodexSHA256 = "/k", testDigest
	var b strings.Builder
	for _, a := range c.Assignments() {
		b.WriteString(a.String() + "\n")
	}
	writeFile(t, filepath.Join(c.ProjectRoot, FileName), b.String())
	got, err := Load(c.ProjectRoot, nil)
	if err != nil {
		t.Fatalf("Load of %q: %v", b.String(), err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("Load = %+v, want %+v", got, c)
	}
}

// TestExample checks that hermes-box.conf.example mentions every key and
// yields exactly the defaults.
func TestExample(t *testing.T) {
	path, err := filepath.Abs(filepath.Join("..", "..", "hermes-box.conf.example"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range settings {
		t.Run(s.key, func(t *testing.T) {
			if !strings.Contains(string(data), "\n"+s.key+"=") && !strings.Contains(string(data), "\n# "+s.key+"=") {
				t.Errorf("%s does not mention %s", path, s.key)
			}
		})
	}
	root := t.TempDir()
	got, err := Load(root, []string{EnvConfig + "=" + path})
	if err != nil {
		t.Fatalf("Load(example): %v", err)
	}
	want := Default(root)
	want.File = path
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load(example) = %+v, want the defaults %+v", got, want)
	}
}

// TestNothingExecutes checks that the package cannot run programs.
func TestNothingExecutes(t *testing.T) {
	forbidden := map[string]bool{"os/exec": true, "syscall": true, "plugin": true, "unsafe": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); forbidden[p] {
				t.Errorf("%s imports %s", name, p)
			}
		}
	}
}
