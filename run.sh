SR=${SR:-/work/main/build/silvic-ring}
read p0 p1 < <(python3 -c "
import socket
s=[socket.socket() for _ in range(2)]
[x.bind(('127.0.0.1',0)) for x in s]
print(*[x.getsockname()[1] for x in s])")
printf '127.0.0.1:%s\n' $p0 $p1 > peers
python3 next_park.py $p0 $p1 & 
printf 'barrier\nsleep 1\nbarrier\nallreduce sum i64 1\nexpect 2\n' | $SR run --peers peers --rank 1 --token 1234 --timeout 5
echo "rank 1 exit status: $?"
wait
