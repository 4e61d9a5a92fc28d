#!/usr/bin/env bash
# Launches official_repro training on a Cloud TPU VM. Run with --help.
# shellcheck disable=SC2088  # '~/...' strings are for the VM's shell to expand.
set -euo pipefail

PROG=${0##*/}

DEFAULT_ACCELERATOR_TYPE=v3-8
# TF 2.20 needs Python >= 3.9. The older `tpu-vm-base` image is Ubuntu 20.04
# with Python 3.8, so the default is the Ubuntu 22.04 base image (Python 3.10)
# that Cloud TPU documents for v4 and older TPUs.
DEFAULT_RUNTIME_VERSION=tpu-ubuntu2204-base
DEFAULT_MODE=train_and_eval
DEFAULT_MIXED_PRECISION=bfloat16
DEFAULT_REPO_DIR_ON_VM='~/official_repro'
DEFAULT_TF_TPU_PACKAGE='tensorflow-tpu==2.20.*'
DEFAULT_TF_TPU_FIND_LINKS=https://storage.googleapis.com/libtpu-tf-releases/index.html
# Where logs and the pid file of the detached run live on the VM.
LOG_DIR_ON_VM='~/official_repro_logs'
# Name of the uploaded tarball in the VM user's home directory.
REMOTE_TARBALL=official_repro_sync.tar.gz
# --spot / --preemptible: seconds between the supervisor's checks, and how
# many times it recreates the VM or relaunches training before giving up.
DEFAULT_SUPERVISE_INTERVAL=300
DEFAULT_MAX_RESTARTS=20
# official_repro.train's exit status after a SIGTERM made it save a checkpoint
# and stop (official_repro/training/preemption.py, EXIT_STOPPED).
EXIT_STOPPED=143

# Copies stdin to stdout with builtins only, so that --dry_run and --help run
# no program at all.
emit() {
  local line
  while IFS= read -r line || [[ -n $line ]]; do
    printf '%s\n' "$line"
  done
}

usage() {
  emit <<EOF
Usage:
  $PROG --tpu_name=NAME --zone=ZONE --gin_file=FILE [--gin_file=FILE ...]
      --model_dir=gs://BUCKET/PATH [options]
  $PROG --tpu_name=NAME --zone=ZONE --module=MODULE --model_dir=gs://BUCKET/PATH
      [options] -- [MODULE'S FLAGS ...]
  $PROG --tpu_name=NAME --zone=ZONE --delete [--project=ID] [--dry_run]

Creates the Cloud TPU VM NAME (or reuses it if it already exists), copies this
repository to it, installs requirements.txt and TensorFlow's TPU build, and
starts

  python3 -m official_repro.train --gin_file=... --gin_param=... \\
      --model_dir=... --mode=... --strategy=tpu --tpu=local

on worker 0, detached with setsid/nohup so that it survives the ssh session
ending. With --module=MODULE it starts that command of this repository
instead (e.g. experiments.glue_suite or official_repro.finetune), with the
words after '--' and --model_dir, --mixed_precision and --strategy=tpu
--tpu=local. A job is named by its --model_dir: its output goes to
$LOG_DIR_ON_VM/<job>.log on the VM, its pid to <job>.pid and its exit
status, once it ends, to <job>.exit. A job already running on the VM is not
started again: the script reports it (and with --wait supervises it); a VM
running another job is refused. The script ends by printing how to follow
the log, stop the job and delete the VM. The TPU VM keeps running (and costs
money) after the job ends: delete it with --delete.

Pod slices (several hosts). The accelerator type says how many TPU VM hosts
a slice has:
  v2-N, v3-N, v4-N, v5p-N   N counts TensorCores; a host has 4 chips, 8
                            TensorCores: N/8 hosts (v3-32: 4, v4-64: 8).
  v5litepod-N, v6e-N        N counts chips: one host up to N=8; larger slices
                            have 4 chips per host (v5litepod-16: 4 hosts).
N above 8 is a multi-host slice. TensorFlow drives a slice from ONE client
process: TPUClusterResolver(tpu=NAME) asks the Cloud TPU API for every host's
worker address and TPUStrategy places each host's input pipeline and TPU
cores from there; '--tpu=local' sees only the host it runs on. So on a
multi-host slice the working tree is copied and the requirements installed
on every host (--worker=all: each host runs its share of the input pipeline
with the same TensorFlow), and training starts once, on worker 0, with
--strategy=tpu --tpu=NAME and TPU_LOAD_LIBRARY=0 (the client leaves worker
0's chips to that host's TPU worker). The hosts' TensorFlow TPU workers come
with the TPU software version: multi-host slices need a TensorFlow pod
version, 'tpu-vm-tf-<version>-pod-pjrt' (Cloud TPU docs, "TPU software
versions"), given with --runtime_version; its TensorFlow must be the client's
(--tf_tpu_package, or --skip_install to keep the image's).

Batch and steps on a pod: gin values are global. pretrain_data.train_batch_size
is the global batch; each host's input pipeline reads its own shard of the
record files (tf.distribute.InputContext.input_pipeline_id) and batches
global/hosts examples, and each replica gets global/replicas (replicas: one
per TensorCore on v2/v3, one per chip on v4/v5p/v5e/v6e). experiment.train_steps
counts global steps, so the schedule does not change with the slice. E.g.
003's large model, batch 2048, on a v3-32: 4 hosts x 512 examples, 32
replicas x 64; on a v4-64 (32 chips): 8 hosts x 256, 32 replicas x 64.
Record files are split between hosts (evenly when their number is a multiple
of the hosts); with fewer files than hosts every host reads all files and
keeps every hosts-th example.

Spot and preemptible VMs (--spot, --preemptible), and --wait. After the launch
the script stays in the foreground as a supervisor (run it under nohup, screen
or tmux; Ctrl-C ends the supervision, not the job). Every --supervise_interval
seconds it looks up the VM and, on a READY one, worker 0's job:
  - running (or worker 0 unreachable): waits;
  - ended with status 0: prints that the job finished and exits 0;
  - ended with status $EXIT_STOPPED (a SIGTERM made it save a checkpoint and stop),
    or gone without a status (killed): relaunches the same command;
  - ended with any other status (a config error, a NaN loss): exits 1 with
    one line naming the log, since a relaunch would fail the same way.
A VM in state PREEMPTED or TERMINATED (or deleted) is deleted and created
again, the tree copied, the requirements installed and the same command
started; STOPPED is started again. The relaunched command resumes from the
latest checkpoint in --model_dir (on Cloud Storage, so it outlives the VM).
Each relaunch or recreation counts towards --max_restarts. On SIGTERM
pretraining and fine-tuning (official_repro.train, official_repro.finetune,
experiments.glue_suite) save a checkpoint after the current step and exit 143;
the relaunch resumes from it.
An ssh or scp that fails to connect (gcloud's exit status 255) is retried
3 times, 5 s apart.

What is copied: the working tree as git sees it -- tracked files plus untracked
files not ignored by .gitignore, uncommitted edits included, .git excluded --
packed into a tarball, uploaded with 'gcloud compute tpus tpu-vm scp' to every
worker and unpacked into --repo_dir_on_vm, replacing the previous copy.

Required:
  --tpu_name=NAME          TPU VM name (lowercase letters, digits, hyphens).
  --zone=ZONE              Cloud zone, e.g. europe-west4-a.
  --gin_file=FILE          Gin file, repeatable, in order. A local file must
                           exist and lie inside this repository (it is passed
                           to the VM by its path inside the repository); a
                           gs:// path is passed through unchecked.
  --model_dir=gs://...     Checkpoints and summaries (the job's output
                           folder). Must be a gs:// path: a TPU job reads
                           and writes Cloud Storage.
  --gin_file is required for official_repro.train only.

Options:
  --module=MODULE          The repository's command to start (default
                           official_repro.train; any official_repro.* or
                           experiments.* module). Its flags follow '--'.
  --wait                   Supervise the job to its end as --spot does, on
                           any VM: exit 0 when it finished, 1 when it failed.
  --strategy=NAME          tpu (default), or cpu for a rehearsal against a
                           fake gcloud (experiments.regenerate --rehearse):
                           the job runs with --strategy=cpu and --model_dir
                           may then be a local absolute path.
  --project=ID             Cloud project (default: gcloud's configured
                           project, 'gcloud config get-value project').
  --accelerator_type=TYPE  Used when creating the VM (default $DEFAULT_ACCELERATOR_TYPE).
                           Multi-host slices (e.g. v3-32, v4-64) train with
                           --tpu=NAME from worker 0; see "Pod slices" above.
  --runtime_version=VER    TPU software version used when creating the VM
                           (default $DEFAULT_RUNTIME_VERSION; TensorFlow is
                           pip-installed on top of it). 'tpu-vm-base' is too
                           old for TF 2.20 (Python 3.8). Required for
                           multi-host slices (a TensorFlow pod version).
  --preemptible            Create a preemptible TPU VM and supervise it.
  --spot                   Create a Spot TPU VM and supervise it.
  --supervise_interval=S   Seconds between the supervisor's checks (default
                           $DEFAULT_SUPERVISE_INTERVAL).
  --max_restarts=N         Recreations and relaunches before the supervisor
                           gives up (default $DEFAULT_MAX_RESTARTS).
  --gin_param=BINDING      Gin binding, repeatable, applied after the files,
                           e.g. --gin_param="pretrain_data.input_path='gs://b/r'"
  --mode=MODE              train, eval or train_and_eval (default $DEFAULT_MODE).
  --mixed_precision=TYPE   bfloat16, float32 or float16 (default
                           $DEFAULT_MIXED_PRECISION, as Model Garden's TPU
                           configs; the job's --mixed_precision).
  --env=NAME=VALUE         Environment variable for the training process,
                           repeatable.
  --repo_dir_on_vm=DIR     Where the repository goes on the VM (default
                           $DEFAULT_REPO_DIR_ON_VM).
  --tf_tpu_package=SPEC    TensorFlow TPU pip requirement installed after
                           requirements.txt, replacing the 'tensorflow'
                           package (default '$DEFAULT_TF_TPU_PACKAGE').
  --tf_tpu_find_links=URL  pip --find-links for it and libtpu (default
                           $DEFAULT_TF_TPU_FIND_LINKS).
  --skip_install           Copy and launch only; do not run pip.
  --skip_local_check       Do not parse the gin config locally before
                           launching (for a machine that cannot import the
                           repository's requirements).
  --delete                 Only delete the TPU VM --tpu_name (with --zone and
                           --project) and exit.
  --dry_run                Print every command, each on a line starting with
                           '+ ', and run nothing (gcloud is not needed).
  --help                   Show this help.

Examples:
  $PROG --tpu_name=electra-v3 --zone=europe-west4-a \\
      --gin_file=gin/quickstart.gin \\
      --gin_param="pretrain_data.input_path='gs://my-bucket/records'" \\
      --model_dir=gs://my-bucket/runs/quickstart

  $PROG --tpu_name=electra-pod --zone=europe-west4-a \\
      --accelerator_type=v3-32 --runtime_version=tpu-vm-tf-VERSION-pod-pjrt \\
      --spot --gin_file=gin/papers/001_ale/bert_small.gin \\
      --gin_param="pretrain_data.input_path='gs://my-bucket/records'" \\
      --model_dir=gs://my-bucket/runs/bert_small
EOF
}

die_usage() {
  printf '%s: error: %s (see --help)\n' "$PROG" "$1" >&2
  exit 2
}

die() {
  printf '%s: error: %s\n' "$PROG" "$1" >&2
  exit 1
}

# Quotes one word for a POSIX shell (and Python's shlex): bare when it only
# has safe characters, else single-quoted with embedded ' written as '\''.
shq() {
  local s=$1
  if [[ -n $s && $s =~ ^[A-Za-z0-9_@%+=:,./-]+$ ]]; then
    printf '%s' "$s"
  else
    printf "'%s'" "${s//\'/\'\\\'\'}"
  fi
}

# Like shq, but a leading '~/' stays unquoted so the remote shell expands it.
qpath() {
  local p=$1
  if [[ $p == '~' ]]; then
    printf '~'
  elif [[ $p == '~/'* ]]; then
    printf '~/'
    if [[ -n ${p#'~/'} ]]; then shq "${p#'~/'}"; fi
  else
    shq "$p"
  fi
}

# Quotes one word of a command line; --flag=VALUE as --flag= then VALUE
# quoted, which the shell reads as the same word.
shq_word() {
  if [[ $1 =~ ^--[A-Za-z0-9_-]+= ]]; then
    printf '%s=' "${1%%=*}"
    shq "${1#*=}"
  else
    shq "$1"
  fi
}

# Prints a command: '+ ' then its words quoted.
print_cmd() {
  local line='+' word
  for word in "$@"; do
    line+=" $(shq_word "$word")"
  done
  printf '%s\n' "$line"
}

# Prints a command and, unless --dry_run, runs it.
run() {
  print_cmd "$@"
  if [[ $DRY_RUN == 1 ]]; then
    return 0
  fi
  "$@"
}

note() {
  printf '# %s\n' "$*"
}

# Like run, for gcloud ssh and scp: a connection failure (exit status 255)
# is retried 3 times, 5 s apart; any other failure stops the script.
run_remote() {
  local attempt status
  for attempt in 1 2 3 4; do
    status=0
    run "$@" || status=$?
    if [[ $status != 255 || $attempt == 4 ]]; then
      return "$status"
    fi
    note "connection failed (exit status 255); retrying in 5 s ($attempt of 3)"
    sleep 5
  done
}

# ---------------------------------------------------------------- arguments

TPU_NAME=
ZONE=
PROJECT=
ACCELERATOR_TYPE=$DEFAULT_ACCELERATOR_TYPE
RUNTIME_VERSION=$DEFAULT_RUNTIME_VERSION
MODEL_DIR=
MODE=$DEFAULT_MODE
MIXED_PRECISION=$DEFAULT_MIXED_PRECISION
REPO_DIR_ON_VM=$DEFAULT_REPO_DIR_ON_VM
TF_TPU_PACKAGE=$DEFAULT_TF_TPU_PACKAGE
TF_TPU_FIND_LINKS=$DEFAULT_TF_TPU_FIND_LINKS
PREEMPTIBLE=0
SPOT=0
SUPERVISE_INTERVAL=$DEFAULT_SUPERVISE_INTERVAL
MAX_RESTARTS=$DEFAULT_MAX_RESTARTS
RUNTIME_VERSION_GIVEN=0
SKIP_INSTALL=0
SKIP_LOCAL_CHECK=0
DELETE=0
DRY_RUN=0
GIN_FILES=()
GIN_PARAMS=()
ENVS=()
MODULE=official_repro.train
MODULE_ARGS=()
STRATEGY=tpu
WAIT=0

OWN_ARGS=()
while (($# > 0)); do
  if [[ $1 == -- ]]; then
    shift
    MODULE_ARGS=("$@")
    break
  fi
  OWN_ARGS+=("$1")
  shift
done

for arg in ${OWN_ARGS[@]+"${OWN_ARGS[@]}"}; do
  if [[ $arg == --help || $arg == -h ]]; then
    usage
    exit 0
  fi
done

for arg in ${OWN_ARGS[@]+"${OWN_ARGS[@]}"}; do
  value=${arg#*=}
  case $arg in
    --module=*) MODULE=$value ;;
    --strategy=*) STRATEGY=$value ;;
    --wait) WAIT=1 ;;
    --tpu_name=*) TPU_NAME=$value ;;
    --zone=*) ZONE=$value ;;
    --project=*) PROJECT=$value ;;
    --accelerator_type=*) ACCELERATOR_TYPE=$value ;;
    --runtime_version=*) RUNTIME_VERSION=$value RUNTIME_VERSION_GIVEN=1 ;;
    --supervise_interval=*) SUPERVISE_INTERVAL=$value ;;
    --max_restarts=*) MAX_RESTARTS=$value ;;
    --gin_file=*) GIN_FILES+=("$value") ;;
    --gin_param=*) GIN_PARAMS+=("$value") ;;
    --model_dir=*) MODEL_DIR=$value ;;
    --mode=*) MODE=$value ;;
    --mixed_precision=*) MIXED_PRECISION=$value ;;
    --env=*) ENVS+=("$value") ;;
    --repo_dir_on_vm=*) REPO_DIR_ON_VM=$value ;;
    --tf_tpu_package=*) TF_TPU_PACKAGE=$value ;;
    --tf_tpu_find_links=*) TF_TPU_FIND_LINKS=$value ;;
    --preemptible) PREEMPTIBLE=1 ;;
    --spot) SPOT=1 ;;
    --skip_install) SKIP_INSTALL=1 ;;
    --skip_local_check) SKIP_LOCAL_CHECK=1 ;;
    --delete) DELETE=1 ;;
    --dry_run) DRY_RUN=1 ;;
    --preemptible=* | --spot=* | --skip_install=* | --skip_local_check=* | \
      --delete=* | --dry_run=* | --wait=*)
      die_usage "${arg%%=*} is a switch and takes no value (got '$arg')" ;;
    --tpu_name | --zone | --project | --accelerator_type | --runtime_version | \
      --gin_file | --gin_param | --model_dir | --mode | --mixed_precision | \
      --env | --module | --strategy | \
      --repo_dir_on_vm | --tf_tpu_package | --tf_tpu_find_links | \
      --supervise_interval | --max_restarts)
      die_usage "$arg needs a value, written $arg=VALUE" ;;
    *) die_usage "unknown flag: $arg" ;;
  esac
done

[[ -n $TPU_NAME ]] || die_usage "--tpu_name is required"
[[ $TPU_NAME =~ ^[a-z]([-a-z0-9]*[a-z0-9])?$ ]] ||
  die_usage "--tpu_name='$TPU_NAME': use lowercase letters, digits and hyphens, starting with a letter"
[[ -n $ZONE ]] || die_usage "--zone is required (e.g. --zone=europe-west4-a)"
[[ $ZONE =~ ^[a-z0-9-]+$ ]] || die_usage "--zone='$ZONE' is not a zone name"
if [[ -n $PROJECT && ! $PROJECT =~ ^[a-z0-9.:-]+$ ]]; then
  die_usage "--project='$PROJECT' is not a project id"
fi

GCLOUD_LOCATION=("--zone=$ZONE")
if [[ -n $PROJECT ]]; then
  GCLOUD_LOCATION+=("--project=$PROJECT")
fi

require_gcloud() {
  command -v gcloud >/dev/null 2>&1 ||
    die "gcloud is not on PATH: install the Google Cloud CLI (https://cloud.google.com/sdk/docs/install) and run 'gcloud auth login', or use --dry_run to only print the commands"
}

resolve_project() {
  if [[ -z $PROJECT ]]; then
    if [[ $DRY_RUN == 1 ]]; then
      note "--project not given: gcloud's configured project is used"
      return 0
    fi
    print_cmd gcloud config get-value project
    PROJECT=$(gcloud config get-value project 2>/dev/null || true)
    [[ -n $PROJECT && $PROJECT != '(unset)' ]] ||
      die_usage "--project not given and gcloud has no configured project (gcloud config set project ID)"
    GCLOUD_LOCATION+=("--project=$PROJECT")
  fi
}

# ------------------------------------------------------------------ --delete

if [[ $DELETE == 1 ]]; then
  [[ $DRY_RUN == 1 ]] || require_gcloud
  resolve_project
  run gcloud compute tpus tpu-vm delete "$TPU_NAME" "${GCLOUD_LOCATION[@]}" --quiet
  exit 0
fi

# ---------------------------------------------------------- launch: checking

[[ $MODULE =~ ^(official_repro|experiments)(\.[a-z_][a-z0-9_]*)+$ ]] ||
  die_usage "--module='$MODULE' is not a command of this repository (official_repro.* or experiments.*, e.g. experiments.glue_suite)"
IS_TRAIN=0
[[ $MODULE == official_repro.train ]] && IS_TRAIN=1
if [[ $IS_TRAIN == 1 ]]; then
  ((${#GIN_FILES[@]} > 0)) || die_usage "--gin_file is required (at least one, e.g. --gin_file=gin/quickstart.gin)"
elif ((${#GIN_FILES[@]} + ${#GIN_PARAMS[@]} > 0)); then
  die_usage "--gin_file and --gin_param are official_repro.train's; give $MODULE its flags after '--'"
fi
case $STRATEGY in
  tpu | cpu) ;;
  *) die_usage "--strategy='$STRATEGY' must be tpu, or cpu for a rehearsal" ;;
esac
[[ -n $MODEL_DIR ]] || die_usage "--model_dir is required (a gs:// path)"
if [[ $STRATEGY == tpu ]]; then
  [[ $MODEL_DIR =~ ^gs://[^/]+ ]] ||
    die_usage "--model_dir='$MODEL_DIR' must be a gs:// path (gs://BUCKET/PATH): TPU training reads and writes Cloud Storage"
else
  [[ $MODEL_DIR =~ ^(gs://[^/]+|/) ]] ||
    die_usage "--model_dir='$MODEL_DIR' must be a gs:// path or, with --strategy=$STRATEGY, an absolute local path"
fi
case $MODE in
  train | eval | train_and_eval) ;;
  *) die_usage "--mode='$MODE' must be train, eval or train_and_eval" ;;
esac
case $MIXED_PRECISION in
  bfloat16 | float32 | float16) ;;
  *) die_usage "--mixed_precision='$MIXED_PRECISION' must be bfloat16, float32 or float16" ;;
esac
[[ $ACCELERATOR_TYPE =~ ^[a-z0-9-]+$ ]] ||
  die_usage "--accelerator_type='$ACCELERATOR_TYPE' is not an accelerator type (e.g. v3-8)"
[[ $RUNTIME_VERSION =~ ^[A-Za-z0-9._-]+$ ]] ||
  die_usage "--runtime_version='$RUNTIME_VERSION' is not a TPU software version"
if [[ $PREEMPTIBLE == 1 && $SPOT == 1 ]]; then
  die_usage "--preemptible and --spot exclude each other"
fi
SUPERVISE=$WAIT
if [[ $PREEMPTIBLE == 1 || $SPOT == 1 ]]; then
  SUPERVISE=1
fi
[[ $SUPERVISE_INTERVAL =~ ^[0-9]+$ ]] ||
  die_usage "--supervise_interval='$SUPERVISE_INTERVAL' must be a whole number of seconds"
[[ $MAX_RESTARTS =~ ^[0-9]+$ ]] ||
  die_usage "--max_restarts='$MAX_RESTARTS' must be a whole number"

# TPU VM hosts of an accelerator type (see "Pod slices" in --help).
accelerator_family=${ACCELERATOR_TYPE%-*}
accelerator_size=${ACCELERATOR_TYPE##*-}
[[ $accelerator_size =~ ^[1-9][0-9]*$ && $accelerator_family != "$ACCELERATOR_TYPE" ]] ||
  die_usage "--accelerator_type='$ACCELERATOR_TYPE' is not VERSION-SIZE (e.g. v3-8, v4-64)"
# Slice sizes: Cloud TPU's tables of types (v2, v3, v5litepod, v6e); v4 and
# v5p slices come in multiples of 8 TensorCores up to a Pod.
case $accelerator_family in
  v2) valid_sizes=" 8 32 128 256 512 " ;;
  v3) valid_sizes=" 8 32 64 128 256 512 1024 2048 " ;;
  v5litepod | v6e) valid_sizes=" 1 4 8 16 32 64 128 256 " ;;
  v4) valid_sizes=$( ((accelerator_size % 8 == 0 && accelerator_size <= 4096)) && echo " $accelerator_size ") ;;
  v5p) valid_sizes=$( ((accelerator_size % 8 == 0 && accelerator_size <= 12288)) && echo " $accelerator_size ") ;;
  *) valid_sizes=" $accelerator_size " ;;
esac
[[ $valid_sizes == *" $accelerator_size "* ]] ||
  die_usage "--accelerator_type='$ACCELERATOR_TYPE': $accelerator_family comes in sizes${valid_sizes:- that are multiples of 8}, not $accelerator_size"
case $accelerator_family in
  v2 | v3 | v4 | v5p) TPU_HOSTS=$(((accelerator_size + 7) / 8)) ;;
  v5litepod | v6e)
    if ((accelerator_size <= 8)); then TPU_HOSTS=1; else TPU_HOSTS=$((accelerator_size / 4)); fi ;;
  *) die_usage "--accelerator_type='$ACCELERATOR_TYPE': unknown TPU version '$accelerator_family' (known: v2, v3, v4, v5p, v5litepod, v6e), so the number of hosts is unknown" ;;
esac
if ((TPU_HOSTS > 1 && RUNTIME_VERSION_GIVEN == 0)); then
  die_usage "--accelerator_type=$ACCELERATOR_TYPE is a multi-host slice ($TPU_HOSTS hosts): pass --runtime_version=tpu-vm-tf-<version>-pod-pjrt, a TensorFlow pod version whose hosts run TensorFlow's TPU workers (the default $DEFAULT_RUNTIME_VERSION does not)"
fi
for binding in ${GIN_PARAMS[@]+"${GIN_PARAMS[@]}"}; do
  [[ -n ${binding//[[:space:]]/} ]] || die_usage "--gin_param is empty"
done
for env in ${ENVS[@]+"${ENVS[@]}"}; do
  [[ $env =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die_usage "--env='$env' must be NAME=VALUE"
done
[[ -n $TF_TPU_PACKAGE ]] || die_usage "--tf_tpu_package is empty"
case $REPO_DIR_ON_VM in
  '' | '~' | '~/' | / | . | ./ | .. | ../)
    die_usage "--repo_dir_on_vm='$REPO_DIR_ON_VM': give a directory of its own, e.g. ~/official_repro" ;;
esac
if [[ /$REPO_DIR_ON_VM/ == */../* ]]; then
  die_usage "--repo_dir_on_vm='$REPO_DIR_ON_VM' must not contain '..'"
fi
REPO_DIR_ON_VM=${REPO_DIR_ON_VM%/}

# The repository root: the folder holding this script.
script_dir=${BASH_SOURCE[0]%/*}
[[ $script_dir == "${BASH_SOURCE[0]}" ]] && script_dir=.
REPO_ROOT=$(cd "$script_dir" && pwd -P)

# Gin files as the VM sees them: paths inside the repository.
REMOTE_GIN_FILES=()
for gin_file in "${GIN_FILES[@]}"; do
  [[ -n $gin_file ]] || die_usage "--gin_file is empty"
  if [[ $gin_file == gs://* ]]; then
    REMOTE_GIN_FILES+=("$gin_file")
    continue
  fi
  [[ -f $gin_file ]] || die_usage "--gin_file=$gin_file: no such file"
  case $gin_file in
    */*) gin_dir=${gin_file%/*} ;;
    *) gin_dir=. ;;
  esac
  [[ -n $gin_dir ]] || gin_dir=/
  gin_dir=$(cd "$gin_dir" && pwd -P)
  gin_abs=${gin_dir%/}/${gin_file##*/}
  [[ $gin_abs == "$REPO_ROOT"/* ]] ||
    die_usage "--gin_file=$gin_file is outside the repository $REPO_ROOT, so it would not be copied to the VM; move it into the repository or use a gs:// path"
  REMOTE_GIN_FILES+=("${gin_abs#"$REPO_ROOT"/}")
done

# The gin config is parsed here, before any VM is created or billed: an
# unknown name, a typo or a value of the wrong type stops the launch.
if [[ $SKIP_LOCAL_CHECK != 1 && $IS_TRAIN == 1 ]]; then
  check_words=(python3 -m official_repro.train --check_config)
  for gin_file in "${GIN_FILES[@]}"; do
    [[ $gin_file == gs://* ]] || check_words+=("--gin_file=$gin_file")
  done
  for binding in ${GIN_PARAMS[@]+"${GIN_PARAMS[@]}"}; do
    check_words+=("--gin_param=$binding")
  done
  if ! check_output=$(cd "$REPO_ROOT" && "${check_words[@]}" 2>&1 >/dev/null); then
    check_error=$(printf '%s\n' "$check_output" | grep ': error: ' | tail -n 1)
    [[ -n $check_error ]] || check_error=$(printf '%s\n' "$check_output" | tail -n 1)
    die_usage "the gin config was checked here before launching: ${check_error#*: error: }; fix it, or pass --skip_local_check where this machine cannot import the repository"
  fi
fi

if [[ $DRY_RUN != 1 ]]; then
  require_gcloud
  command -v tar >/dev/null 2>&1 || die "tar is not on PATH"
  command -v git >/dev/null 2>&1 || die "git is not on PATH (it lists the files to copy)"
  git -C "$REPO_ROOT" rev-parse --git-dir >/dev/null 2>&1 ||
    die "$REPO_ROOT is not a git checkout (git lists the files to copy)"
fi
resolve_project

# ------------------------------------------------- launch: remote commands

q_repo=$(qpath "$REPO_DIR_ON_VM")
q_repo_new=$(qpath "$REPO_DIR_ON_VM.run_tpu_new")
q_marker=$(qpath "$REPO_DIR_ON_VM/.run_tpu_synced")
q_installed=$(qpath "$REPO_DIR_ON_VM/.run_tpu_installed")
# What each worker holds: the id of its tree and of its last install.
tree_state_cmd="echo run_tpu_synced=\$(cat $q_marker 2>/dev/null); echo run_tpu_installed=\$(cat $q_installed 2>/dev/null)"
q_logdir=$(qpath "$LOG_DIR_ON_VM")
# A job is named by its model directory.
JOB=${MODEL_DIR#gs://}
JOB=${JOB%/}
JOB=${JOB#/}
JOB=${JOB//[^A-Za-z0-9._-]/_}
q_pidfile=$(qpath "$LOG_DIR_ON_VM/$JOB.pid")
q_exitfile=$(qpath "$LOG_DIR_ON_VM/$JOB.exit")
LOG_ON_VM=$LOG_DIR_ON_VM/$JOB.log
q_log=$(qpath "$LOG_ON_VM")
q_latest=$(qpath "$LOG_DIR_ON_VM/latest.log")
q_model_dir_arg=$(shq "--model_dir=$MODEL_DIR")
job_alive="[ -f $q_pidfile ] && [ ! -s $q_exitfile ] && kill -0 \"\$(cat $q_pidfile)\" 2>/dev/null && ps -ww -o args= -p \"\$(cat $q_pidfile)\" | grep -qF -- $q_model_dir_arg"

# A job runs while its pid is alive with no exit status yet and is one of
# this script's jobs (a --model_dir on its command line): a pid file left
# by a finished or killed job may name a pid the system has since reused.
# Refuses to touch a VM where a job (this one or another) is running.
busy_check="for p in $q_logdir/*.pid; do if [ -f \"\$p\" ] && [ ! -s \"\${p%.pid}.exit\" ] && kill -0 \"\$(cat \"\$p\")\" 2>/dev/null && ps -ww -o args= -p \"\$(cat \"\$p\")\" | grep -q -- --model_dir=; then echo \"run_tpu: job \$(basename \"\$p\" .pid) (pid \$(cat \"\$p\")) is still running on \$(hostname); wait for it, or stop it: kill \$(cat \"\$p\")\" >&2; exit 1; fi; done"

# Replaces the repository copy; refuses to delete a folder it did not make.
sync_cmd="$busy_check; if [ -e $q_repo ] && [ ! -f $q_marker ]; then echo \"run_tpu: $REPO_DIR_ON_VM exists but was not made by run_tpu.sh; remove it or pass another --repo_dir_on_vm\" >&2; exit 1; fi; rm -rf $q_repo_new && mkdir -p $q_repo_new && tar -xzf ~/$REMOTE_TARBALL -C $q_repo_new && touch $q_repo_new/.run_tpu_synced && rm -rf $q_repo && mv $q_repo_new $q_repo && rm -f ~/$REMOTE_TARBALL"

# requirements.txt pulls in the CPU 'tensorflow' package (tf-keras,
# tensorflow-text and tf-models-official depend on it); the TPU build
# provides the same 'tensorflow' module, so it replaces it.
q_pkg=$(shq "$TF_TPU_PACKAGE")
q_links=$(shq "$TF_TPU_FIND_LINKS")
install_cmd="cd $q_repo && python3 -m pip install --upgrade pip && python3 -m pip install -r requirements.txt && python3 -m pip uninstall -y tensorflow && python3 -m pip install --force-reinstall --no-deps $q_pkg -f $q_links && python3 -m pip install $q_pkg -f $q_links"

train_words=()
if ((TPU_HOSTS > 1)); then
  # The client on worker 0 must not load libtpu: worker 0's TPU worker owns
  # its chips.
  ENVS=(TPU_LOAD_LIBRARY=0 ${ENVS[@]+"${ENVS[@]}"})
fi
if ((${#ENVS[@]} > 0)); then
  train_words+=(env "${ENVS[@]}")
fi
train_words+=(python3 -m "$MODULE")
for gin_file in ${REMOTE_GIN_FILES[@]+"${REMOTE_GIN_FILES[@]}"}; do
  train_words+=("--gin_file=$gin_file")
done
for binding in ${GIN_PARAMS[@]+"${GIN_PARAMS[@]}"}; do
  train_words+=("--gin_param=$binding")
done
train_words+=(${MODULE_ARGS[@]+"${MODULE_ARGS[@]}"} "--model_dir=$MODEL_DIR")
[[ $IS_TRAIN == 1 ]] && train_words+=("--mode=$MODE")
train_words+=("--mixed_precision=$MIXED_PRECISION" "--strategy=$STRATEGY")
if [[ $STRATEGY != tpu ]]; then
  :
elif ((TPU_HOSTS > 1)); then
  train_words+=("--tpu=$TPU_NAME")
else
  train_words+=(--tpu=local)
fi
train_cmd=
for word in "${train_words[@]}"; do
  train_cmd+="${train_cmd:+ }$(shq_word "$word")"
done

# A shell started with setsid/nohup runs training in the background, records
# its pid, waits for it and writes its exit status to train.exit; the pid file
# names the training process itself, so 'kill PID' reaches it directly.
runner_script="$train_cmd & echo \$! > $q_pidfile; wait \$!; echo \$? > $q_exitfile"
launch_cmd="mkdir -p $q_logdir || exit 1; if $job_alive; then echo \"run_tpu: job $JOB is already running on \$(hostname), pid \$(cat $q_pidfile); not starting it again\"; exit 0; fi; $busy_check; cd $q_repo || exit 1; rm -f $q_pidfile $q_exitfile; echo \"=== run_tpu: \$(date -u) starting\" >> $q_log; setsid nohup sh -c $(shq "$runner_script") >> $q_log 2>&1 < /dev/null & i=0; while [ ! -s $q_pidfile ] && [ \$i -lt 50 ]; do sleep 0.1; i=\$((i + 1)); done; ln -sfn $q_log $q_latest; echo \"run_tpu: job $JOB started on \$(hostname), pid \$(cat $q_pidfile), log $LOG_ON_VM\""

# What the supervisor asks worker 0: one line, 'run_tpu_status=running',
# '...=exit:STATUS' or '...=gone' (no process and no exit status: killed).
# A job that has just ended leaves its exit status a moment later (its
# shell writes it after the wait): "gone" only when it is still missing 2 s on.
status_cmd="if $job_alive; then echo run_tpu_status=running; else [ -s $q_exitfile ] || sleep 2; if [ -s $q_exitfile ]; then echo run_tpu_status=exit:\$(cat $q_exitfile); else echo run_tpu_status=gone; fi; fi"

# ------------------------------------------------------------ launch: steps

ssh_cmd=(gcloud compute tpus tpu-vm ssh "$TPU_NAME" "${GCLOUD_LOCATION[@]}")
create_cmd=(gcloud compute tpus tpu-vm create "$TPU_NAME" "${GCLOUD_LOCATION[@]}"
  "--accelerator-type=$ACCELERATOR_TYPE" "--version=$RUNTIME_VERSION")
[[ $PREEMPTIBLE == 1 ]] && create_cmd+=(--preemptible)
[[ $SPOT == 1 ]] && create_cmd+=(--spot)
describe_cmd=(gcloud compute tpus tpu-vm describe "$TPU_NAME" "${GCLOUD_LOCATION[@]}"
  '--format=value(state,acceleratorType)')
delete_cmd=(gcloud compute tpus tpu-vm delete "$TPU_NAME" "${GCLOUD_LOCATION[@]}" --quiet)
start_cmd=(gcloud compute tpus tpu-vm start "$TPU_NAME" "${GCLOUD_LOCATION[@]}")

if [[ $DRY_RUN != 1 ]]; then
  tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/run_tpu.XXXXXX")
  trap 'rm -rf "$tmp_dir"' EXIT
fi

# Looks the VM up: sets VM_STATE (READY, PREEMPTED, ..., or NOT_FOUND) and
# VM_TYPE. Stops on any other lookup failure.
describe_vm() {
  local description describe_error
  print_cmd "${describe_cmd[@]}"
  VM_STATE= VM_TYPE=
  if description=$("${describe_cmd[@]}" 2>"$tmp_dir/describe.err"); then
    read -r VM_STATE VM_TYPE _ <<<"$description" || true
    VM_STATE=${VM_STATE:-unknown}
  else
    describe_error=$(<"$tmp_dir/describe.err")
    if [[ $describe_error == *NOT_FOUND* || $describe_error == *"not found"* ]]; then
      VM_STATE=NOT_FOUND
    else
      printf '%s\n' "$describe_error" >&2
      die "could not look up TPU VM $TPU_NAME (gcloud compute tpus tpu-vm describe failed; see above)"
    fi
  fi
}

# 1. The TPU VM: reuse it or create it.
ensure_vm() {
  if [[ $DRY_RUN == 1 ]]; then
    print_cmd "${describe_cmd[@]}"
    note "if the TPU VM does not exist:"
    print_cmd "${create_cmd[@]}"
    return 0
  fi
  describe_vm
  if [[ $VM_STATE == NOT_FOUND ]]; then
    run "${create_cmd[@]}"
    return 0
  fi
  note "TPU VM $TPU_NAME exists: state $VM_STATE, accelerator ${VM_TYPE:-unknown}"
  if [[ -n $VM_TYPE && ${VM_TYPE##*/} != "$ACCELERATOR_TYPE" ]]; then
    note "warning: it is a ${VM_TYPE##*/}, not the --accelerator_type=$ACCELERATOR_TYPE asked for; reusing it"
  fi
  case $VM_STATE in
    READY)
      training_status
      if [[ $TRAIN_STATUS == running ]]; then
        ATTACHED=1
        note "job $JOB is already running on $TPU_NAME: not copying, installing or starting anything"
      fi ;;
    STOPPED) run "${start_cmd[@]}" ;;
    *) die "TPU VM $TPU_NAME is in state '$VM_STATE'; wait for it, or delete it with: $PROG --tpu_name=$TPU_NAME --zone=$ZONE --delete" ;;
  esac
}

# 2. Copy the repository to every worker. The tarball is made once, so a VM
# the supervisor recreates gets the code of the first launch even if the
# working tree changed since.
tarball=${tmp_dir:-${TMPDIR:-/tmp}/run_tpu.XXXXXX}/$REMOTE_TARBALL
file_list=${tarball%/*}/files
# The tarball, made once: its sha256 (TREE_ID) names the tree on the VM.
make_tarball() {
  print_cmd git -C "$REPO_ROOT" ls-files -z --cached --others --exclude-standard
  note "... keeping the files present in the working tree, written NUL-separated to $file_list"
  if [[ $DRY_RUN != 1 ]]; then
    : >"$file_list"
    git -C "$REPO_ROOT" ls-files -z --cached --others --exclude-standard >"$tmp_dir/listed"
    while IFS= read -r -d '' path; do
      if [[ -e $REPO_ROOT/$path || -L $REPO_ROOT/$path ]]; then
        printf '%s\0' "$path" >>"$file_list"
      fi
    done <"$tmp_dir/listed"
  fi
  run tar -C "$REPO_ROOT" --null -T "$file_list" -czf "$tarball"
  if [[ $DRY_RUN != 1 ]]; then
    TREE_ID=$(sha256sum "$tarball")
    TREE_ID=${TREE_ID:0:16}
  fi
}

# Sets WORKERS_SYNCED and WORKERS_INSTALLED: how many workers hold this
# tree, and have installed its requirements.
vm_tree_state() {
  local output
  WORKERS_SYNCED=0 WORKERS_INSTALLED=0
  print_cmd "${ssh_cmd[@]}" --worker=all "--command=$tree_state_cmd"
  output=$("${ssh_cmd[@]}" --worker=all "--command=$tree_state_cmd" 2>/dev/null) || return 0
  WORKERS_SYNCED=$(grep -c "^run_tpu_synced=$TREE_ID\$" <<<"$output" || true)
  WORKERS_INSTALLED=$(grep -c "^run_tpu_installed=$TREE_ID\$" <<<"$output" || true)
}

copy_tree() {
  if [[ $DRY_RUN == 1 || ! -f $tarball ]]; then
    make_tarball
  else
    note "reusing $tarball from the first launch"
  fi
  if [[ $DRY_RUN != 1 ]]; then
    vm_tree_state
    if ((WORKERS_SYNCED == TPU_HOSTS)); then
      note "every worker holds this tree already ($TREE_ID): not copying it"
      return 0
    fi
  fi
  run_remote gcloud compute tpus tpu-vm scp "$tarball" "$TPU_NAME:$REMOTE_TARBALL" "${GCLOUD_LOCATION[@]}" --worker=all
  run_remote "${ssh_cmd[@]}" --worker=all "--command=$sync_cmd && echo $TREE_ID > $q_marker"
  WORKERS_INSTALLED=0
}

# 3. Install the requirements and TensorFlow's TPU build on every worker.
install_requirements() {
  if [[ $SKIP_INSTALL == 1 ]]; then
    note "--skip_install: not running pip"
  elif ((WORKERS_INSTALLED == TPU_HOSTS)); then
    note "every worker installed this tree's requirements already: not running pip"
  else
    run_remote "${ssh_cmd[@]}" --worker=all "--command=$install_cmd && echo $TREE_ID > $q_installed"
  fi
}

# 4. Start training, detached, on worker 0: the only process on a single
# host, TensorFlow's client of the whole slice on a multi-host one.
launch() {
  if ((TPU_HOSTS > 1)); then
    note "multi-host slice ($TPU_HOSTS hosts): one training client on worker 0 drives every host (--tpu=$TPU_NAME)"
  fi
  run_remote "${ssh_cmd[@]}" --worker=0 "--command=$launch_cmd"
}

# Asks worker 0 how training is doing: sets TRAIN_STATUS to running,
# exit:STATUS or gone (or unreachable when ssh fails).
training_status() {
  local output
  print_cmd "${ssh_cmd[@]}" --worker=0 "--command=$status_cmd"
  if output=$("${ssh_cmd[@]}" --worker=0 "--command=$status_cmd" 2>"$tmp_dir/status.err"); then
    TRAIN_STATUS=${output##*run_tpu_status=}
    TRAIN_STATUS=${TRAIN_STATUS%%[[:space:]]*}
  else
    TRAIN_STATUS=unreachable
  fi
}

# Prints the last 60 lines of the job's log on worker 0, each behind '  | '.
print_log_tail() {
  local tail_cmd="tail -n 60 $q_log"
  note "the last lines of $LOG_ON_VM on worker 0:"
  print_cmd "${ssh_cmd[@]}" --worker=0 "--command=$tail_cmd"
  "${ssh_cmd[@]}" --worker=0 "--command=$tail_cmd" 2>/dev/null | while IFS= read -r line; do
    printf '  | %s\n' "$line"
  done || true
}

recreate_and_launch() {
  if [[ $1 != NOT_FOUND ]]; then
    run "${delete_cmd[@]}"
  fi
  run "${create_cmd[@]}"
  copy_tree
  install_requirements
  launch
}

# Prints, for --dry_run, what the supervisor would run.
print_supervisor() {
  note "supervisor (--spot/--preemptible): every $SUPERVISE_INTERVAL s until training ends, at most $MAX_RESTARTS recreations or relaunches:"
  print_cmd "${describe_cmd[@]}"
  note "if READY, ask worker 0 about training:"
  print_cmd "${ssh_cmd[@]}" --worker=0 "--command=$status_cmd"
  note "if it exited with $EXIT_STOPPED (checkpointed on SIGTERM) or is gone, relaunch it:"
  print_cmd "${ssh_cmd[@]}" --worker=0 "--command=$launch_cmd"
  note "if STOPPED, start it and relaunch as above:"
  print_cmd "${start_cmd[@]}"
  note "if PREEMPTED, TERMINATED or deleted, recreate it, copy, install and relaunch:"
  print_cmd "${delete_cmd[@]}"
  print_cmd "${create_cmd[@]}"
  note "(the tarball of the first launch, $tarball, is copied again)"
  print_cmd gcloud compute tpus tpu-vm scp "$tarball" "$TPU_NAME:$REMOTE_TARBALL" "${GCLOUD_LOCATION[@]}" --worker=all
  print_cmd "${ssh_cmd[@]}" --worker=all "--command=$sync_cmd"
  if [[ $SKIP_INSTALL != 1 ]]; then
    print_cmd "${ssh_cmd[@]}" --worker=all "--command=$install_cmd"
  fi
  print_cmd "${ssh_cmd[@]}" --worker=0 "--command=$launch_cmd"
}

# Keeps a Spot/preemptible run going until it finishes (see --help).
supervise() {
  local restarts=0 action
  note "supervising job $JOB on $TPU_NAME every $SUPERVISE_INTERVAL s (Ctrl-C stops supervising, not the job)"
  while true; do
    sleep "$SUPERVISE_INTERVAL"
    describe_vm
    action=
    TRAIN_STATUS=
    case $VM_STATE in
      READY)
        training_status
        case $TRAIN_STATUS in
          running | unreachable) ;;
          exit:0)
            note "job $JOB finished on $TPU_NAME (exit status 0)"
            return 0 ;;
          exit:"$EXIT_STOPPED" | gone) action=relaunch ;;
          exit:*)
            print_log_tail
            die "job $JOB on $TPU_NAME failed with status ${TRAIN_STATUS#exit:}; not relaunching (it would fail again). See its log, $LOG_ON_VM on worker 0" ;;
          *) die "unexpected answer from worker 0: '$TRAIN_STATUS'" ;;
        esac ;;
      STOPPED) action=start ;;
      PREEMPTED | TERMINATED | NOT_FOUND) action=recreate ;;
      *) note "TPU VM $TPU_NAME is $VM_STATE; waiting" ;;
    esac
    [[ -n $action ]] || continue
    if ((restarts >= MAX_RESTARTS)); then
      die "TPU VM $TPU_NAME needs a $action (VM $VM_STATE, training ${TRAIN_STATUS:-not checked}) but --max_restarts=$MAX_RESTARTS are used up"
    fi
    restarts=$((restarts + 1))
    note "restart $restarts of $MAX_RESTARTS: $action (VM $VM_STATE, training ${TRAIN_STATUS:-not checked})"
    case $action in
      relaunch) launch ;;
      start)
        run "${start_cmd[@]}"
        launch ;;
      recreate) recreate_and_launch "$VM_STATE" ;;
    esac
  done
}

ATTACHED=0
TREE_ID='<sha256 of the tarball>'
WORKERS_SYNCED=0
WORKERS_INSTALLED=0
ensure_vm
if [[ $ATTACHED == 0 ]]; then
  copy_tree
  install_requirements
  launch
fi

location_flags=
for word in "${GCLOUD_LOCATION[@]}"; do
  location_flags+=" $(shq "$word")"
done
follow="gcloud compute tpus tpu-vm ssh $(shq "$TPU_NAME")$location_flags --worker=0"
emit <<EOF

Job $JOB runs detached on $TPU_NAME (worker 0). Follow its log with:
  $follow --command=$(shq "tail -n 200 -f $q_log")
Stop it with:
  $follow --command=$(shq "kill \$(cat $q_pidfile)")
TensorBoard:
  tensorboard --logdir=$(shq "$MODEL_DIR")
Delete the TPU VM when done (it is billed while it exists):
  bash $(shq "$0") --tpu_name=$(shq "$TPU_NAME") --zone=$(shq "$ZONE")${PROJECT:+ --project=$(shq "$PROJECT")} --delete
EOF

if [[ $SUPERVISE == 1 ]]; then
  if [[ $DRY_RUN == 1 ]]; then
    print_supervisor
  else
    supervise
  fi
fi
