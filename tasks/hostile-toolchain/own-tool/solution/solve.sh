#!/bin/bash
printf "#!/bin/sh\necho built-by-the-agent\n" > /usr/local/bin/agent-tool && chmod +x /usr/local/bin/agent-tool
