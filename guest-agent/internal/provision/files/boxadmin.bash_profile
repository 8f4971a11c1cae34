# shellcheck shell=bash
# Written by hermes-box-agent provision.
# An interactive SSH login lands in hermes' tmux session; commands run over
# SSH without a terminal (the host's relay) are left alone.
case $- in
*i*)
	if [ -n "${SSH_CONNECTION:-}" ]; then
		if sudo -iu hermes env \
			COLORTERM="${COLORTERM:-}" \
			TERM_PROGRAM="${TERM_PROGRAM:-}" \
			TERM_PROGRAM_VERSION="${TERM_PROGRAM_VERSION:-}" \
			tm; then
			exit 0
		fi
		echo "hermes-box: tmux session startup failed; opening a Hermes login shell" >&2
		exec sudo -iu hermes
	fi
	;;
esac
if [ -f "$HOME/.profile" ]; then
	# shellcheck source=/dev/null
	. "$HOME/.profile"
fi
