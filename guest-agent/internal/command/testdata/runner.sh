#!/bin/sh
# Child process for the ExecRunner tests; $1 picks the behaviour.
case $1 in
output)
	echo out
	echo err >&2
	;;
fail)
	i=0
	while [ $i -lt 2000 ]; do
		echo "line$i" >&2
		i=$((i + 1))
	done
	exit 7
	;;
hang)
	# A grandchild in the same process group must die with its parent.
	sleep 30 &
	sleep 30
	echo never
	;;
env)
	echo "$PATH $HERMES_HOME"
	pwd
	;;
esac
