# Test definition, assertions and event-loop friendly waiting.
#
#   test "name" {body}              run body; report ok / not ok
#   assert_equal expected actual ?detail?
#   assert_match pattern string ?detail?
#   assert_error pattern {code}     code must raise an error matching pattern
#   assert {expr} ?detail?
#   wait_for_condition timeout_ms {expr} ?message?
#   esleep ms                       sleep while the event loop runs
#   skip "why"                      end the current test as skipped (ok)

namespace eval tt {
    variable passed 0
    variable failed 0
    variable skipped 0
    variable file ""
    variable only ""
    variable failures {}
    # Timeouts grow under sanitizers (set from the server path in run.tcl).
    variable time_scale 1
}

proc scaled_ms {ms} { return [expr {int($ms * $::tt::time_scale)}] }

proc esleep {ms} {
    set var ::tt::sleep[incr ::tt::sleep_seq]
    after $ms [list set $var 1]
    vwait $var
    unset $var
}
set ::tt::sleep_seq 0

proc tt::report {ok name {msg ""}} {
    variable file
    set full "$file: $name"
    if {$ok} {
        incr tt::passed
        puts "ok - $full"
    } else {
        incr tt::failed
        regsub -all {[\r\n]+} $msg { | } msg
        puts "not ok - $full: $msg"
        lappend tt::failures $full
    }
    flush stdout
}

proc tt::selected {name} {
    variable only
    if {$only eq ""} { return 1 }
    return [expr {[string match $only $tt::file] ||
                  [string match $only [file rootname $tt::file]] ||
                  [string match $only "$tt::file: $name"]}]
}

proc test {name body} {
    if {![tt::selected $name]} return
    set t0 [clock milliseconds]
    set code [catch {uplevel 1 $body} err opts]
    set ok [expr {$code == 0 || $code == 2}]
    if {$code == 1 && [lindex [dict get $opts -errorcode] 0] eq "SKIP"} {
        incr tt::skipped
        puts "ok - $tt::file: $name # skip $err"
        incr tt::passed
        return
    }
    if {!$ok && [lindex [dict get $opts -errorcode] 0] ne "ASSERT"} {
        # An unexpected Tcl error: show where it came from.
        set err "$err ([tt::where $opts])"
    }
    # A test also fails when the server under test died or logged a
    # sanitizer report while it ran.
    if {$ok} {
        set problem [srv_health_problem]
        if {$problem ne ""} { set ok 0; set err $problem }
    }
    set ms [expr {[clock milliseconds] - $t0}]
    if {$ms > 5000} { append name " (${ms} ms)" }
    tt::report $ok $name $err
}

# Where an unexpected Tcl error came from: the first frames of errorInfo.
proc tt::where {opts} {
    set lines [lrange [split [dict get $opts -errorinfo] \n] 1 4]
    return [string trim [regsub -all {\s+} [join $lines " "] " "]]
}

proc skip {why} { return -code error -errorcode {SKIP} $why }

proc tt::fail {msg} { return -level 2 -code error -errorcode {ASSERT} $msg }

proc tt::show {s} {
    if {[string length $s] > 200} {
        set s "[string range $s 0 199]... ([string length $s] bytes)"
    }
    # Make control bytes visible in messages.
    return [string map {"\r" {\r} "\n" {\n} "\0" {\0}} $s]
}

proc assert {cond {detail ""}} {
    if {![uplevel 1 [list expr $cond]]} {
        tt::fail "assertion failed: $cond $detail"
    }
}

proc assert_equal {expected actual {detail ""}} {
    if {$expected ne $actual} {
        tt::fail "expected '[tt::show $expected]' got '[tt::show $actual]' $detail"
    }
}

proc assert_match {pattern actual {detail ""}} {
    if {![string match $pattern $actual]} {
        tt::fail "expected match '[tt::show $pattern]' got '[tt::show $actual]' $detail"
    }
}

proc assert_error {pattern code} {
    if {[catch {uplevel 1 $code} err]} {
        if {![string match $pattern $err]} {
            tt::fail "expected error matching '$pattern' got '[tt::show $err]'"
        }
        return $err
    }
    tt::fail "expected error matching '$pattern' but got '[tt::show $err]'"
}

proc wait_for_condition {timeout_ms cond {message ""}} {
    set deadline [expr {[clock milliseconds] + [scaled_ms $timeout_ms]}]
    while {![uplevel 1 [list expr $cond]]} {
        if {[clock milliseconds] > $deadline} {
            if {$message eq ""} { set message "condition not met in time: $cond" }
            tt::fail $message
        }
        esleep 10
    }
}

# Runs an external program bounded in time; returns {exit_code output}.
proc run_bounded {seconds args} {
    set cmd [list timeout --kill-after=5 [expr {int(ceil($seconds * $::tt::time_scale))}] {*}$args]
    set code [catch {exec {*}$cmd 2>@1} out opts]
    if {$code == 0} { return [list 0 $out] }
    set ec [dict get $opts -errorcode]
    if {[lindex $ec 0] eq "CHILDSTATUS"} { return [list [lindex $ec 2] $out] }
    return [list -1 $out]
}
